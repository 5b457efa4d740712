package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
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
	newEncoder := map[string]func(zapcore.EncoderConfig) zapcore.Encoder{"json": zapcore.NewJSONEncoder, "console": zapcore.NewConsoleEncoder}[o.format]
	if newEncoder == nil {
		return logr.Discard(), nil, fmt.Errorf("--log-format must be json or console, got %q", o.format)
	}
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	if o.verbosity < 0 {
		return logr.Discard(), nil, fmt.Errorf("-v must not be negative")
	}
	core := zapcore.NewCore(newEncoder(encCfg), zapcore.AddSync(w), zap.NewAtomicLevelAt(zapcore.Level(-o.verbosity)))
	z := zap.New(core)
	return logr.New(&uniqueKeys{sink: zapr.NewLogger(z).GetSink()}), func() { _ = z.Sync() }, nil
}

// uniqueKeys keeps each key once per line (the last value wins, at its first position).
// app adds "composition" once per entry point, but adapters log it too on their own lines;
// zap would write every copy, and a JSON object with repeated keys is read differently by
// different log pipelines.
type uniqueKeys struct {
	sink   logr.LogSink
	values []any
}

// Init does nothing: zapr.NewLogger initialised the sink, and no caller is logged.
func (u *uniqueKeys) Init(logr.RuntimeInfo) {}

func (u *uniqueKeys) Enabled(level int) bool { return u.sink.Enabled(level) }

func (u *uniqueKeys) Info(level int, msg string, kv ...any) {
	u.sink.Info(level, msg, mergeKeys(u.values, kv)...)
}

func (u *uniqueKeys) Error(err error, msg string, kv ...any) {
	u.sink.Error(err, msg, mergeKeys(u.values, kv)...)
}

func (u *uniqueKeys) WithValues(kv ...any) logr.LogSink {
	return &uniqueKeys{sink: u.sink, values: mergeKeys(u.values, kv)}
}

func (u *uniqueKeys) WithName(name string) logr.LogSink {
	return &uniqueKeys{sink: u.sink.WithName(name), values: u.values}
}

// mergeKeys returns a new list of base then kv with repeated string keys folded. A dangling
// key keeps a placeholder value so that later pairs stay aligned.
func mergeKeys(base, kv []any) []any {
	if len(kv) == 0 {
		return base
	}
	out := make([]any, 0, len(base)+len(kv)+1)
	at := make(map[string]int, (len(base)+len(kv))/2)
	for _, pairs := range [][]any{base, kv} {
		for i := 0; i < len(pairs); i += 2 {
			var v any = "(MISSING)"
			if i+1 < len(pairs) {
				v = pairs[i+1]
			}
			if k, ok := pairs[i].(string); ok {
				if j, seen := at[k]; seen {
					out[j+1] = v
					continue
				}
				at[k] = len(out)
			}
			out = append(out, pairs[i], v)
		}
	}
	return out
}

// routeClientGoLogs sends what client-go logs through klog (watch errors, client-side
// throttling, leader election) to log, so that every line on stderr is in the chosen format.
// It is set once for the process and never undone: client-go's goroutines may log until exit.
func routeClientGoLogs(log logr.Logger) {
	klog.SetLogger(log.WithName("client-go"))
}
