// Package image tests what `make image` ships: it unpacks bin/tombstone-recovery-image.tar (an
// OCI image layout), checks the image's config and filesystem (non-root user, entrypoint, labels,
// no shell, a static binary), applies every object of the release files with server-side apply to
// a real API server, and runs the image's own binary through record → recreate → recover under
// exactly the release's RBAC, then checks that every metric deploy/alerts.yaml and
// deploy/dashboard.json use is exposed. `make test` builds the image first; a missing archive
// fails the package with directions, it never skips.
package image
