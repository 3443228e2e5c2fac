package netns

import "errors"

// ErrNoAddress means every address block of the test range is taken, by
// other tests or by something else on this machine.
var ErrNoAddress = errors.New("netns: no free address in 10.213.0.0/16")
