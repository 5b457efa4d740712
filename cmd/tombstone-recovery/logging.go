package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// logOptions: JSON logs in production, console for people; -v raises verbosity (logr V levels).
type logOptions struct {
	format    string
	verbosity int
}

func (o *logOptions) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.format, "log-format", "json", "log format: json or console")
	fs.IntVar(&o.verbosity, "v", 0, "log verbosity: 0 decisions and writes, 1 every chunk, 2 every skip")
}

func (o *logOptions) build(w io.Writer) (logr.Logger, func(), error) {
	var enc zapcore.Encoder
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	switch o.format {
	case "json":
		enc = zapcore.NewJSONEncoder(encCfg)
	case "console":
		enc = zapcore.NewConsoleEncoder(encCfg)
	default:
		return logr.Discard(), nil, fmt.Errorf("--log-format must be json or console, got %q", o.format)
	}
	if o.verbosity < 0 {
		return logr.Discard(), nil, fmt.Errorf("-v must not be negative")
	}
	core := zapcore.NewCore(enc, zapcore.AddSync(w), zap.NewAtomicLevelAt(zapcore.Level(-o.verbosity)))
	z := zap.New(core)
	return zapr.NewLogger(z), func() { _ = z.Sync() }, nil
}
