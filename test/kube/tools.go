//go:build tools

// Package kube pins the sources of the test API server and etcd binaries.
package kube

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
