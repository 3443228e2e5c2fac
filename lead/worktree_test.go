package lead

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCapLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p-1.log")
	big := make([]byte, MaxLog+1000)
	for i := range big {
		big[i] = 'a'
	}
	copy(big[len(big)-4:], "tail")
	if err := os.WriteFile(path, big, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := capLog(path); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if len(got) > MaxLog+100 || string(got[len(got)-4:]) != "tail" {
		t.Fatalf("cut log: %d bytes, ends %q", len(got), got[len(got)-4:])
	}
	small := filepath.Join(t.TempDir(), "s.log")
	os.WriteFile(small, []byte("short\n"), 0o600)
	if err := capLog(small); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(small); string(got) != "short\n" {
		t.Fatalf("a short log changed: %q", got)
	}
}
