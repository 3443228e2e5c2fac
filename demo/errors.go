package demo

import "errors"

// ErrNoTmux means tmux is not installed.
var ErrNoTmux = errors.New("orch demo needs tmux: install it (Debian/Ubuntu: sudo apt-get install -y tmux; macOS: brew install tmux) and run orch demo again")

// ErrNoNotify means orch-notify is not next to orch.
var ErrNoNotify = errors.New("orch-notify is not next to orch: build both with CGO_ENABLED=0 go build -o bin/ ./cmd/... and run bin/orch demo")
