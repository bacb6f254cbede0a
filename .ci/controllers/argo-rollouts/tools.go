//go:build tools

// Package tools pins the upstream command this wrapper builds, so `go mod tidy` keeps what it needs.
package tools

import _ "github.com/argoproj/argo-rollouts/cmd/rollouts-controller"
