package inbox

import "errors"

// ErrNotInstalled means no lead agent was installed under that name:
// there is no record of when its inbox starts.
var ErrNotInstalled = errors.New("no lead agent installed under that name (run orch lead install claude)")

// ErrEmpty means a take that does not wait found nothing waiting.
var ErrEmpty = errors.New("nothing waiting")
