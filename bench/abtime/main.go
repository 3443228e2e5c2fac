// Command abtime times commands from exec to exit, interleaved: every round
// runs each case once, in an order shuffled anew each round (fixed seed),
// after a few warm-up rounds. It is the scratch A/B harness behind the
// "tried, not kept" figures in BENCHMARKS.md; the bench's own start-up
// section is the one that counts.
//
//	go run ./bench/abtime [-n 600] [-pause 2ms] 'label=[ENV=value ...] command args' ...
//
// Each case is a label, "=", then a command line split on spaces, with
// leading NAME=value words added to the environment (as a shell would). A
// case that exits non-zero stops the run.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"
)

type benchCase struct {
	label string
	env   []string
	args  []string
	d     []time.Duration
}

func main() {
	n := flag.Int("n", 600, "timed rounds")
	warmup := flag.Int("warmup", 5, "untimed rounds first")
	pause := flag.Duration("pause", 2*time.Millisecond, "pause after each run")
	flag.Parse()
	var cases []*benchCase
	for _, a := range flag.Args() {
		label, line, ok := strings.Cut(a, "=")
		words := strings.Fields(line)
		c := &benchCase{label: label}
		for len(words) > 0 && strings.Contains(words[0], "=") {
			c.env, words = append(c.env, words[0]), words[1:]
		}
		if !ok || label == "" || len(words) == 0 {
			fmt.Fprintf(os.Stderr, "abtime: %q: want label=[ENV=value ...] command args\n", a)
			os.Exit(2)
		}
		c.args = words
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		fmt.Fprintln(os.Stderr, "usage: abtime [-n 600] [-pause 2ms] 'label=[ENV=value ...] command args' ...")
		os.Exit(2)
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "abtime:", err)
		os.Exit(1)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for r := 0; r < *warmup+*n; r++ {
		for _, i := range rng.Perm(len(cases)) {
			c := cases[i]
			cmd := exec.Command(c.args[0], c.args[1:]...)
			cmd.Env = append(os.Environ(), c.env...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
			t0 := time.Now()
			err := cmd.Run()
			d := time.Since(t0)
			if err != nil {
				fmt.Fprintf(os.Stderr, "abtime: %s: %v\n", c.label, err)
				os.Exit(1)
			}
			if r >= *warmup {
				c.d = append(c.d, d)
			}
			time.Sleep(*pause) // lets the previous run's aftermath (broker, reaping) settle; not a wait for anything
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for _, c := range cases {
		sort.Slice(c.d, func(i, j int) bool { return c.d[i] < c.d[j] })
		k := len(c.d)
		fmt.Printf("%-16s n %d  median %6.3f ms  p25 %6.3f  p75 %6.3f\n", c.label, k, ms(c.d[k/2]), ms(c.d[k/4]), ms(c.d[3*k/4]))
	}
}
