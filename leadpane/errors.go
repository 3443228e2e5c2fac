package leadpane

import "errors"

// ErrBadPane means --lead-pane is not a tmux pane id such as %3.
var ErrBadPane = errors.New("not a tmux pane id")

// ErrNoPane means tmux has no such pane (or it is dead).
var ErrNoPane = errors.New("no such tmux pane")

// ErrWorkerPane means the pane is one of orch's workers: its lines are
// dispatches, never callbacks.
var ErrWorkerPane = errors.New("pane is a worker's")

// ErrOwnPane means the pane is the one orch serve itself runs in.
var ErrOwnPane = errors.New("pane is orch serve's own")

// ErrNoPrompt means orch cannot tell the lead's empty prompt on its
// screen: neither a lead agent whose screens orch knows nor --lead-prompt.
var ErrNoPrompt = errors.New("no way to see the lead's prompt")
