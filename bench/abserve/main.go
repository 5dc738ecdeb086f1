// Command abserve compares two rlm serve instances (two builds, or one
// build with two settings) on the same machine at the same time: it sends
// batches of `print(1)` runs to POST /execute of A and B in turn, A first
// in odd rounds and B first in even ones, so that a machine whose speed
// drifts (this project's VM moves by ±10 % within a minute) slows both
// alike, and prints each one's rate and B ÷ A. Every answer must carry
// stdout "1\n"; any other is counted as bad.
//
//	abserve [-rounds 30] [-clients 32] [-batch 64] URL_A URL_B
//
// BENCHMARKS.md quotes it; two instances of one build read 0.97-1.03.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	rounds := flag.Int("rounds", 30, "rounds; each sends a batch to A and one to B")
	clients := flag.Int("clients", 32, "concurrent clients")
	batch := flag.Int("batch", 64, "requests in a batch")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: abserve [flags] URL_A URL_B (each rlm serve's /execute)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 || *rounds < 1 || *clients < 1 || *batch < 1 {
		flag.Usage()
		os.Exit(2)
	}
	urls := [2]string{flag.Arg(0), flag.Arg(1)}
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *clients}}
	var bad atomic.Int64
	for _, u := range urls { // warm both: sandboxes up, connections open
		fire(c, u, 4**batch, *clients, &bad)
	}
	bad.Store(0)
	var took [2]time.Duration
	for r := 0; r < *rounds; r++ {
		for i := range 2 {
			if r%2 == 1 {
				i = 1 - i
			}
			took[i] += fire(c, urls[i], *batch, *clients, &bad)
		}
	}
	n := float64(*rounds * *batch)
	fmt.Printf("A %.1f req/s  B %.1f req/s  B/A %.4f  bad %d\n",
		n/took[0].Seconds(), n/took[1].Seconds(), took[0].Seconds()/took[1].Seconds(), bad.Load())
	if bad.Load() > 0 {
		os.Exit(1)
	}
}

// fire sends n runs to url from the given number of clients and returns
// how long they took.
func fire(c *http.Client, url string, n, clients int, bad *atomic.Int64) time.Duration {
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for range jobs {
				if !run(c, url) {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

func run(c *http.Client, url string) bool {
	resp, err := c.Post(url, "application/json", bytes.NewReader([]byte(`{"code":"print(1)"}`)))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return err == nil && resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte(`"stdout":"1\n"`))
}
