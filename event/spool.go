package event

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/orch-dev/orch/internal/atomicfile"
)

// Spooled is an event read back from the spool, with the file it came from.
type Spooled struct {
	Event Event
	Path  string
}

// SpoolFile is the file name an event is spooled under: sortable by time.
func SpoolFile(e Event) string {
	return fmt.Sprintf("%019d-%s.json", e.Time.UnixNano(), e.ID)
}

// WriteSpool writes e into dir atomically: a temporary file that is synced
// and then renamed, so a reader never sees half an event. The directory is
// created with mode 0700 if missing.
func WriteSpool(dir string, e Event) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("spool %s: %w", e.ID, err)
	}
	path := filepath.Join(dir, SpoolFile(e))
	if err := atomicfile.Write(path, append(e.Marshal(), '\n'), 0o600); err != nil {
		return "", fmt.Errorf("spool %s: %w", e.ID, err)
	}
	return path, nil
}

// IsSpoolFile reports whether a name in the spool directory is a finished
// spooled event (not a temporary file of a writer still at work).
func IsSpoolFile(name string) bool {
	return strings.HasSuffix(name, ".json") && !strings.HasPrefix(name, ".")
}

// ReadSpoolFile reads and checks one spooled event.
func ReadSpoolFile(path string) (Spooled, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Spooled{}, err
	}
	e, err := Parse(data)
	if err != nil {
		return Spooled{}, fmt.Errorf("spool file %s: %w", filepath.Base(path), err)
	}
	return Spooled{Event: e, Path: path}, nil
}

// ReadSpool returns every event in dir, oldest first (by event time, then
// id). Files that are not valid events are returned in bad, untouched, so
// the caller can report them; they are never silently dropped.
func ReadSpool(dir string) (good []Spooled, bad []error, err error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read spool: %w", err)
	}
	for _, de := range ents {
		if de.IsDir() || !IsSpoolFile(de.Name()) {
			continue
		}
		s, err := ReadSpoolFile(filepath.Join(dir, de.Name()))
		if err != nil {
			bad = append(bad, err)
			continue
		}
		good = append(good, s)
	}
	SortOldestFirst(good)
	return good, bad, nil
}

// SortOldestFirst orders spooled events by event time, then id.
func SortOldestFirst(s []Spooled) {
	sort.SliceStable(s, func(i, j int) bool {
		a, b := s[i].Event, s[j].Event
		if !a.Time.Equal(b.Time) {
			return a.Time.Before(b.Time)
		}
		return a.ID < b.ID
	})
}
