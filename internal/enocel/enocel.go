// Package enocel evaluates CEL as Eno v0.2.17 does: its environment, declared with cel-go at
// Eno's version, and the `composition` it binds (design §6.2). The resource filters use it, the
// models of Eno apply overrides through it (adapters/memory's ApplyOverrides), and the domain's
// tests compile every condition recovery writes with it.
package enocel

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/api/resource"
)

// env declares what Eno v0.2.17's internal/cel declares, with cel-go v0.29.0 as Eno builds with; cel-go
// compiles and evaluates, nothing of CEL is reimplemented. Built on first use: `run` without
// --eno-resource-filter never compiles a condition, and building it at init cost every process heap.
var env = sync.OnceValue(func() *cel.Env {
	env, err := cel.NewEnv(
		ext.Encoders(),
		ext.Lists(),
		ext.Strings(),
		cel.Variable("self", cel.DynType),
		cel.Variable("composition", cel.DynType),
		cel.Variable("pathManagedByEno", cel.BoolType),
		cel.Function("compareResourceQuantities",
			cel.Overload("compare_resource_quantities_equal_string_string",
				[]*cel.Type{cel.StringType, cel.StringType}, cel.IntType,
				cel.BinaryBinding(compareQuantities))),
	)
	if err != nil {
		panic(fmt.Sprintf("building the CEL environment: %v", err))
	}
	return env
})

func compareQuantities(lhs, rhs ref.Val) ref.Val {
	l, err := resource.ParseQuantity(fmt.Sprint(lhs.Value()))
	if err != nil {
		return types.WrapErr(err)
	}
	r, err := resource.ParseQuantity(fmt.Sprint(rhs.Value()))
	if err != nil {
		return types.WrapErr(err)
	}
	return types.Int(l.Cmp(r))
}

// Compile compiles a condition in Eno's environment, as Eno's cel.Parse does, once per
// condition of the last 1,024 (Eno compiles once per loaded synthesis, the models per reconcile).
func Compile(expr string) (cel.Program, error) {
	if prg, ok := programs.Load(expr); ok {
		return prg.(cel.Program), nil
	}
	ast, iss := env().Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, iss.Err()
	}
	prg, err := env().Program(ast, cel.InterruptCheckFrequency(10))
	if err != nil {
		return nil, err
	}
	if compiled.Add(1)%1024 == 0 {
		programs.Clear()
	}
	programs.Store(expr, prg)
	return prg, nil
}

var (
	programs sync.Map // condition: cel.Program
	compiled atomic.Int64
)
