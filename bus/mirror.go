package bus

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/internal/orchdir"
)

// File is the mirror's name in the .orch directory.
const File = orchdir.Bus

// header starts a new bus.md.
const header = "# orch bus\n\nWhat the workers said (orch-notify say), one line each, oldest first: `#<seq> <time> <worker> [<topic>]: <text>`.\nWritten by orch serve from the broker; the text is escaped (control characters, newlines, ESC as \\n, \\x1b...). Do not edit: orch bus shows the same.\n\n"

// Mirror appends every say to the file at path, in order, once each, until
// ctx ends: it starts after the last say the file holds, so a restart
// (even after a SIGKILL between a write and anything else) neither skips
// nor repeats one. A say the bus no longer keeps (its oldest are dropped
// when it is full) is simply not there.
func Mirror(ctx context.Context, r Reader, path string, bad func(seq uint64, err error)) error {
	last, err := LastSeq(path)
	if err != nil {
		return err
	}
	s, err := r.JS.Stream(ctx, broker.BusStream)
	if err != nil {
		return fmt.Errorf("bus mirror: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("bus mirror: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() == 0 {
		if _, err := f.WriteString(header); err != nil {
			return fmt.Errorf("bus mirror: %w", err)
		}
	}
	if last > s.CachedInfo().State.LastSeq {
		// The file goes further than the bus ever did: the bus was made
		// anew (a new .orch/jetstream, another cluster) and numbers its
		// says from 1 again. Its lines follow the old ones.
		if _, err := f.WriteString(renewed); err != nil {
			return fmt.Errorf("bus mirror: %w", err)
		}
		last = 0
	}
	err = r.Each(ctx, last+1, "", true, func(m Message) error {
		if _, err := f.WriteString(m.Line() + "\n"); err != nil {
			return fmt.Errorf("bus mirror: %w", err)
		}
		return nil
	}, bad)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// renewed marks where the says of a bus made anew start in the mirror.
const renewed = "\n(The bus was made anew here: its says are numbered from #1 again.)\n\n"

// LastSeq is the sequence of the last say in the mirror at path (its last
// line of one: after a bus made anew, the numbers start again), 0 when
// there is none (or no file).
func LastSeq(path string) (uint64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("bus mirror: %w", err)
	}
	var last uint64
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) < 2 || line[0] != '#' {
			continue
		}
		end := bytes.IndexByte(line, ' ')
		if end < 0 {
			continue
		}
		if n, err := strconv.ParseUint(string(line[1:end]), 10, 64); err == nil {
			last = n
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("bus mirror: %s: %w", path, err)
	}
	return last, nil
}
