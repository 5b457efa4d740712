//go:build eno

package eno

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// observation is one version of a Composition in which its decision annotation or its current
// synthesis changed, as a watch delivered it.
type observation struct {
	At        time.Time
	Name      string
	UID       types.UID
	Decision  *decision // nil when the annotation is absent
	RawDec    string
	Synthesis synthesis
}

// history records, through a watch, every change of the decision annotation and of the current
// synthesis of the Compositions of one namespace. Eno and the controller are fast (a whole
// recovery takes about a second), so a decision is often replaced before a poll would see it;
// the watch sees every version.
type history struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	obs  []observation
	last map[types.UID]observation
	errs []error
}

func watchHistory(namespace string) *history {
	ctx, cancel := context.WithCancel(context.Background())
	h := &history{cancel: cancel, done: make(chan struct{}), last: map[types.UID]observation{}}
	go func() {
		defer close(h.done)
		for ctx.Err() == nil {
			if err := h.listAndWatch(ctx, namespace); err != nil && ctx.Err() == nil {
				h.mu.Lock()
				h.errs = append(h.errs, err)
				h.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}
	}()
	return h
}

func (h *history) stop() {
	h.cancel()
	<-h.done
}

func (h *history) listAndWatch(ctx context.Context, namespace string) error {
	client := admin.Dynamic.Resource(kubetest.CompositionResource).Namespace(namespace)
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range list.Items {
		h.observe(&list.Items[i])
	}
	w, err := client.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			if ev.Type == watch.Error {
				return fmt.Errorf("composition watch: %v", ev.Object)
			}
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Deleted {
				h.observe(u)
			}
		}
	}
}

func (h *history) observe(u *unstructured.Unstructured) {
	o := observation{At: time.Now(), Name: u.GetName(), UID: u.GetUID(), Synthesis: currentSynthesis(u)}
	o.RawDec = u.GetAnnotations()[decisionAnnotation]
	if d, ok, err := readDecision(u); ok && err == nil {
		o.Decision = &d
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	prev, seen := h.last[o.UID]
	if seen && prev.RawDec == o.RawDec && prev.Synthesis.UUID == o.Synthesis.UUID &&
		prev.Synthesis.Ready == o.Synthesis.Ready && prev.Synthesis.InFlight == o.Synthesis.InFlight {
		return
	}
	h.last[o.UID] = o
	h.obs = append(h.obs, o)
}

// decisions returns the distinct decisions recorded for one incarnation, in the order they
// were written.
func (h *history) decisions(uid types.UID) []decision {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []decision
	raw := ""
	for _, o := range h.obs {
		if o.UID != uid || o.Decision == nil || o.RawDec == raw {
			continue
		}
		raw = o.RawDec
		out = append(out, *o.Decision)
	}
	return out
}

// becameCurrent returns when a synthesis was first seen as the current synthesis of the
// incarnation, and whether it was.
func (h *history) becameCurrent(uid types.UID, synthesisUUID string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.obs {
		if o.UID == uid && o.Synthesis.UUID == synthesisUUID {
			return o.At, true
		}
	}
	return time.Time{}, false
}

// currentSyntheses returns the distinct current synthesis UUIDs of the incarnation, in order.
func (h *history) currentSyntheses(uid types.UID) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, o := range h.obs {
		if o.UID == uid && o.Synthesis.UUID != "" && (len(out) == 0 || out[len(out)-1] != o.Synthesis.UUID) {
			out = append(out, o.Synthesis.UUID)
		}
	}
	return out
}

// problems returns the watch's own errors.
func (h *history) problems() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.errs...)
}
