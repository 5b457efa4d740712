package k8s

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

type selectorMatcher struct{ sel labels.Selector }

func (m selectorMatcher) Matches(l map[string]string) bool { return m.sel.Matches(labels.Set(l)) }

// NewLabelMatcher parses a Kubernetes label selector ("" selects everything) for domain.Scope.
func NewLabelMatcher(selector string) (domain.LabelMatcher, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("parsing label selector %q: %w", selector, err)
	}
	return selectorMatcher{sel: sel}, nil
}
