package lead

import (
	"context"
	"path/filepath"
	"sync"

	"github.com/orch-dev/orch/bus"
)

// mirrorBus keeps .orch/bus.md a copy of the workers' bus (package bus)
// while the loop runs, on a goroutine of its own: the mirror needs
// nothing of the record. The returned function stops it and waits.
func (l *Loop) mirrorBus(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := bus.Reader{JS: l.js, Prefix: l.prefix}
		err := bus.Mirror(ctx, r, filepath.Join(l.orchDir, bus.File), func(seq uint64, err error) {
			l.log.Warn("bus: a message that is not a say, not mirrored", "seq", seq, "err", err)
		})
		if err != nil {
			l.log.Error("bus mirror stopped; bus.md falls behind until orch serve starts again", "err", err)
		}
	}()
	return func() { cancel(); wg.Wait() }
}
