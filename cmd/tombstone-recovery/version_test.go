package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/internal/buildinfo"
)

func TestVersion(t *testing.T) {
	want := buildinfo.Read()
	for _, tc := range []struct {
		name    string
		args    []string
		check   func(t *testing.T, out string)
		wantErr string
	}{
		{name: "text", args: []string{"version"}, check: func(t *testing.T, out string) {
			assert.Equal(t, "tombstone-recovery "+want.Version+" (revision "+want.Revision+", "+want.GoVersion+")\n", out)
		}},
		{name: "json", args: []string{"version", "-o", "json"}, check: func(t *testing.T, out string) {
			var got map[string]string
			require.NoError(t, json.Unmarshal([]byte(out), &got))
			assert.Equal(t, map[string]string{"version": want.Version, "revision": want.Revision, "goVersion": want.GoVersion}, got)
		}},
		{name: "bad format", args: []string{"version", "-o", "yaml"}, wantErr: `version: -o must be text or json, got "yaml"`},
		{name: "stray argument", args: []string{"version", "extra"}, wantErr: `version: unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := dispatch(context.Background(), tc.args, &out, &errOut)
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, out.String())
		})
	}
}
