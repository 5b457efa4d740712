// Package metrics implements ports.Metrics and client-go's workqueue.MetricsProvider with
// Prometheus collectors registered on a caller-supplied registry.
//
// It may import domain, ports, prometheus/client_golang and client-go's workqueue.
package metrics
