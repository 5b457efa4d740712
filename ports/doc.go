// Package ports declares the interfaces the use cases in app consume, and the typed errors
// adapters return through them. It imports domain and the standard library only.
//
// Counterfeiter fakes live in portsfakes; regenerate them with `make generate`.
package ports

//go:generate go tool -modfile=../tools/go.mod counterfeiter -generate
