package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"time"
)

// initCost is one package's init, medians over the traced runs.
type initCost struct {
	Pkg    string
	Clock  time.Duration
	Bytes  int64
	Allocs int64
}

type initReport struct {
	Runs     int
	Packages int           // packages with an init
	Total    time.Duration // median over runs of the sum of init clocks
	MainAt   time.Duration // median over runs of the end of the last init (since runtime start)
	Top      []initCost
}

var initLine = regexp.MustCompile(`^init (\S+) @([0-9.]+) ms, ([0-9.]+) ms clock, ([0-9]+) bytes, ([0-9]+) allocs`)

// initTrace runs orch-notify with bad arguments and GODEBUG=inittrace=1
// runs times, and ranks its packages by median init time.
func initTrace(ctx context.Context, bin string, runs int) (initReport, error) {
	r := initReport{Runs: runs}
	clocks, bytesOf, allocsOf := map[string][]time.Duration{}, map[string][]int64{}, map[string][]int64{}
	var totals, ends []time.Duration
	for i := 0; i < runs; i++ {
		cmd := exec.CommandContext(ctx, bin, badArgs...)
		cmd.Env = append(cleanEnv(), "GODEBUG=inittrace=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Run() // exits 2 by design
		var total, end time.Duration
		sc := bufio.NewScanner(&stderr)
		for sc.Scan() {
			m := initLine.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			pkg, err := url.PathUnescape(m[1]) // "nats%2ego" is nats.go
			if err != nil {
				pkg = m[1]
			}
			at, clock := ms(m[2]), ms(m[3])
			b, _ := strconv.ParseInt(m[4], 10, 64)
			a, _ := strconv.ParseInt(m[5], 10, 64)
			clocks[pkg] = append(clocks[pkg], clock)
			bytesOf[pkg] = append(bytesOf[pkg], b)
			allocsOf[pkg] = append(allocsOf[pkg], a)
			total += clock
			end = max(end, at+clock)
		}
		totals, ends = append(totals, total), append(ends, end)
	}
	if len(clocks) == 0 {
		return r, fmt.Errorf("no init lines in the output of GODEBUG=inittrace=1 %s", bin)
	}
	r.Packages = len(clocks)
	r.Total, r.MainAt = median(totals), median(ends)
	for pkg, c := range clocks {
		r.Top = append(r.Top, initCost{Pkg: pkg, Clock: median(c), Bytes: medianInt(bytesOf[pkg]), Allocs: medianInt(allocsOf[pkg])})
	}
	sort.Slice(r.Top, func(i, j int) bool {
		if r.Top[i].Clock != r.Top[j].Clock {
			return r.Top[i].Clock > r.Top[j].Clock
		}
		return r.Top[i].Pkg < r.Top[j].Pkg
	})
	if len(r.Top) > 10 {
		r.Top = r.Top[:10]
	}
	return r, nil
}

func ms(s string) time.Duration {
	f, _ := strconv.ParseFloat(s, 64)
	return time.Duration(f * float64(time.Millisecond))
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return percentile(s, 500)
}

func medianInt(v []int64) int64 {
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)/2]
}
