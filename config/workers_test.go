package config

import (
	"errors"
	"testing"
)

func TestParseFleet(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		want  string // Fleet.String
		total int
		mixed bool
	}{
		{"", "", 0, false},
		{"0", "", 0, false},
		{"3", "3", 3, false},
		{"claude:3,codex:2", "claude:3,codex:2", 5, true},
		{" a:1 , b:2 ", "a:1,b:2", 3, true},
	} {
		f, err := ParseFleet(tc.spec)
		if err != nil {
			t.Errorf("%q: %v", tc.spec, err)
			continue
		}
		if f.String() != tc.want || f.Total() != tc.total || f.Mixed() != tc.mixed {
			t.Errorf("%q: got %q total %d mixed %v; want %q %d %v", tc.spec, f, f.Total(), f.Mixed(), tc.want, tc.total, tc.mixed)
		}
	}
}

func TestParseFleetRefuses(t *testing.T) {
	for _, bad := range []string{"-1", "65", "claude", "claude:x", "claude:0", "a:1,a:2", "Bad:1", "a:40,b:40", "claude:3,4", ":2"} {
		if _, err := ParseFleet(bad); !errors.Is(err, ErrWorkers) {
			t.Errorf("%q: got %v, want ErrWorkers", bad, err)
		}
	}
}

func TestWorkersInFile(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"workers:\n  codex: 2\n  claude: 3\n", "codex:2,claude:3"}, // the file's order, not sorted
		{"workers: {a: 1, b: 1}\n", "a:1,b:1"},
		{"workers: claude:3,codex:2\n", "claude:3,codex:2"},
	} {
		c, err := Parse([]byte(tc.file))
		if err != nil {
			t.Errorf("%q: %v", tc.file, err)
			continue
		}
		if c.Workers.String() != tc.want {
			t.Errorf("%q: got %q, want %q", tc.file, c.Workers, tc.want)
		}
	}
	for _, bad := range []string{"workers: 3\n", "workers: [a, b]\n", "workers: {a: x}\n", "workers: {a: 0}\n", "workers: {A: 1}\n"} {
		if _, err := Parse([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: got %v, want ErrInvalid", bad, err)
		}
	}
}
