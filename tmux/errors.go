package tmux

import "errors"

// ErrUnsafeText is returned, before tmux runs, for text that could do more
// than type one line: empty text, control characters (newline, ESC, C1),
// invalid UTF-8, or more than MaxLineBytes bytes.
var ErrUnsafeText = errors.New("unsafe text")

// ErrBadPane is returned, before tmux runs, when a pane target is not a pane
// id such as "%3". Indexes are refused because they shift as panes come and go.
var ErrBadPane = errors.New("bad pane id")

// ErrBadSession is returned, before tmux runs, for a session name tmux would
// misread as a target: empty, or containing '.', ':' or a control character.
var ErrBadSession = errors.New("bad session name")

// ErrBadEnv is returned, before tmux runs, for an environment key that is
// empty or contains '=' or a control character.
var ErrBadEnv = errors.New("bad environment variable")

// ErrNoSession is returned by ListPanes and SplitWindow when the session (or
// the tmux server itself) does not exist. KillSession and KillServer treat
// the same condition as success, since the goal state already holds.
var ErrNoSession = errors.New("no such tmux session")

// ErrNoPane means the pane does not exist (any more).
var ErrNoPane = errors.New("no such pane")

// ErrNoStream marks a Client whose runner cannot run a long-lived program.
var ErrNoStream = errors.New("tmux runner cannot stream")

// ErrNotAnswering means a tmux command was killed at its deadline: the
// server is there but does not answer (stopped with SIGSTOP, wedged).
var ErrNotAnswering = errors.New("tmux server not answering")
