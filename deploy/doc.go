// Package deploy holds corral's deployment files — the container image
// (Dockerfile, entrypoint.sh), the Kubernetes manifests (k8s/) and the
// systemd unit (systemd/) — and the tests that check them offline: every
// manifest decodes strictly into the k8s.io/api types and keeps the
// promises deploy/README.md makes (probes on /healthz, the token from a
// Secret, a grace period longer than corral's drain), the unit passes
// systemd-analyze verify, and the server command of each starts, answers
// /healthz and drains on SIGTERM within its grace period.
//
// It is a module of its own so that corral's module never depends on the
// Kubernetes client libraries. It has no code of its own.
package deploy
