package main

import (
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A Go name or path ARCHITECTURE.md cites in backquotes must exist; test files declare nothing.
func TestCheckCitedNames(t *testing.T) {
	files := map[string]string{
		"app/service.go": "package app\n\nimport ctrl \"sigs.k8s.io/controller-runtime\"\n\nvar _ = ctrl.NewManager\n\n" +
			"type Service struct{ deps int }\n\nfunc (s *Service) recover() { emit(\"RecoverySliceLost\") }\n",
		"ports/ports.go":        "package ports\n\ntype Metrics interface{ TombstoneAlert(string) }\n",
		"domain/plan.go":        "package domain\n\nfunc PlanRecovery() {}\n",
		"domain/old_test.go":    "package domain\n\nfunc Gone() {}\n\ntype Controller struct{}\n\nfunc (Controller) processNext() {}\n",
		"runnable/guest.go":     "package runnable\n",
		"adapters/k8s/fleet.go": "package k8s\n",
	}
	for _, tc := range []struct{ cite, want string }{
		{"`Service.recover` and `s.recover()` and `app.Service`", ""},
		{"`Metrics.TombstoneAlert` and `ports.Metrics`", ""},
		{"`domain.PlanRecovery` in `runnable/guest.go`, `fleet.go` and `adapters/k8s`", ""},
		{"`ctrl.NewManager(cfg)`, `make test`, `domain`, `--flag`, `RecoverySliceLost`", ""},
		{"`Controller.processNext`", "cites `Controller.processNext`"},
		{"`Service.processNext`", "cites `Service.processNext`"},
		{"`s.gone`", "cites `s.gone`"},
		{"`domain.Gone`", "cites `domain.Gone`"},
		{"`HandoffLost`", "cites `HandoffLost`"},
		{"`runnable/controller.go`", "cites `runnable/controller.go`, which is no tracked file"},
		{"`gone.go`", "cites `gone.go`"},
	} {
		t.Run(tc.cite, func(t *testing.T) {
			files["ARCHITECTURE.md"] = "# A\n\n" + tc.cite + "\n"
			have := map[string]bool{}
			for name := range files {
				for p := name; p != "."; p = path.Dir(p) {
					have[p] = true
				}
			}
			var got []string
			for _, p := range checkCitedNames(files, have) {
				got = append(got, p.String())
			}
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			if assert.Len(t, got, 1) {
				assert.True(t, strings.HasPrefix(got[0], "ARCHITECTURE.md:3: "+tc.want), got[0])
			}
		})
	}
}
