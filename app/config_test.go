package app_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

func TestConfigValidateBounds(t *testing.T) {
	below := func(x float64) float64 { return math.Nextafter(x, math.Inf(-1)) }
	above := func(x float64) float64 { return math.Nextafter(x, math.Inf(1)) }
	cases := []struct {
		name    string
		mutate  func(c *app.Config)
		setting *app.Setting // nil: valid
		got     string
	}{
		{"the defaults", func(*app.Config) {}, nil, ""},
		{"inventory namespace empty", func(c *app.Config) { c.InventoryNamespace = "" }, &app.SettingInventoryNamespace, ""},
		{"inventory namespace of one character", func(c *app.Config) { c.InventoryNamespace = "x" }, nil, ""},
		{"max chunk bytes 1", func(c *app.Config) { c.MaxChunkBytes = 1 }, &app.SettingMaxChunkBytes, "1"},
		{"max chunk bytes 2", func(c *app.Config) { c.MaxChunkBytes = 2 }, nil, ""},
		{"max chunk bytes at the Secret limit", func(c *app.Config) { c.MaxChunkBytes = domain.SecretDataLimit }, nil, ""},
		{"max chunk bytes one over the Secret limit", func(c *app.Config) { c.MaxChunkBytes = domain.SecretDataLimit + 1 }, &app.SettingMaxChunkBytes, "1048577"},
		{"max chunks 0", func(c *app.Config) { c.MaxChunks = 0 }, &app.SettingMaxChunks, "0"},
		{"max chunks 1", func(c *app.Config) { c.MaxChunks = 1 }, nil, ""},
		{"fraction just below 0", func(c *app.Config) { c.MaxTombstoneFraction = below(0) }, &app.SettingMaxTombstoneFraction, "-5e-324"},
		{"fraction 0", func(c *app.Config) { c.MaxTombstoneFraction = 0 }, nil, ""},
		{"fraction 1 (the guard disabled)", func(c *app.Config) { c.MaxTombstoneFraction = 1 }, nil, ""},
		{"fraction just above 1", func(c *app.Config) { c.MaxTombstoneFraction = above(1) }, &app.SettingMaxTombstoneFraction, "1.0000000000000002"},
		{"fraction NaN", func(c *app.Config) { c.MaxTombstoneFraction = math.NaN() }, &app.SettingMaxTombstoneFraction, "NaN"},
		{"fraction +Inf", func(c *app.Config) { c.MaxTombstoneFraction = math.Inf(1) }, &app.SettingMaxTombstoneFraction, "+Inf"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := app.DefaultConfig()
			tc.mutate(&c)
			err := c.Validate()
			if tc.setting == nil {
				require.NoError(t, err)
				return
			}
			var se *app.SettingError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, *tc.setting, se.Setting)
			assert.Equal(t, tc.got, se.Got)
			assert.NotEmpty(t, se.Rule)
			assert.Contains(t, err.Error(), tc.setting.String())
		})
	}
}

func TestNewRefusesNilDependenciesAndBadConfig(t *testing.T) {
	f := newFixture(t)
	_, err := app.New(f.cfg, app.Deps{})
	require.Error(t, err)
	for _, tc := range []struct {
		mutate  func(c *app.Config)
		setting app.Setting
	}{
		{func(c *app.Config) { c.MaxChunkBytes = domain.SecretDataLimit + 1 }, app.SettingMaxChunkBytes},
		{func(c *app.Config) { c.InventoryNamespace = "" }, app.SettingInventoryNamespace},
		{func(c *app.Config) { c.MaxChunks = 0 }, app.SettingMaxChunks},
		{func(c *app.Config) { c.MaxTombstoneFraction = 1.5 }, app.SettingMaxTombstoneFraction},
		{func(c *app.Config) { c.MaxTombstoneFraction = math.NaN() }, app.SettingMaxTombstoneFraction},
	} {
		bad := f.cfg
		tc.mutate(&bad)
		_, err = app.New(bad, app.Deps{Compositions: f.comps, Live: f.live, Slices: f.reader, Store: f.store, Sink: f.sink, Decisions: f.decisions})
		var se *app.SettingError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, tc.setting, se.Setting)
	}
}
