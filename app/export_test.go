package app

import (
	"context"
	"fmt"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// Recover drives one recovery of comp as given, not as read: what Reconcile does for an eligible
// Composition whose synthesis needs a decision, for tests that hand it a stale or edited copy.
func (s *Service) Recover(ctx context.Context, comp domain.Composition) (RecoverResult, error) {
	if err := s.policy.CheckRecovery(comp); err != nil {
		return RecoverResult{}, err
	}
	state, named := domain.HandoffStateOf(comp, nil)
	res, _, err := s.recover(withComposition(ctx, comp.Ref()), comp, state, named)
	if err != nil {
		return res, fmt.Errorf("recovering: %w", err)
	}
	return res, nil
}
