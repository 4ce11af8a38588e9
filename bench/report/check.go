package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
)

// maxRegression is how far a guarded ratio may fall below the committed report's
// before make bench-check fails.
const maxRegression = 0.25

// headlineBlock reads the machine-readable block of a report.
func headlineBlock(path string) (map[string]float64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := string(raw)
	_, rest, ok := strings.Cut(s, "<!-- bench-check:begin -->")
	if !ok {
		return nil, fmt.Errorf("%s: no bench-check block", path)
	}
	body, _, ok := strings.Cut(rest, "<!-- bench-check:end -->")
	if !ok {
		return nil, fmt.Errorf("%s: unterminated bench-check block", path)
	}
	body = strings.TrimSpace(body)
	body = strings.TrimPrefix(body, "```json")
	body = strings.TrimSuffix(body, "```")
	var block struct {
		Guarded map[string]float64 `json:"guarded"`
	}
	if err := json.Unmarshal([]byte(body), &block); err != nil {
		return nil, fmt.Errorf("%s: bench-check block: %w", path, err)
	}
	if len(block.Guarded) == 0 {
		return nil, errors.New(path + ": bench-check block has no guarded ratios")
	}
	return block.Guarded, nil
}

// compareReports prints each guarded ratio of old and new and returns 1 when one
// regressed by more than maxRegression (or is missing from the new report).
func compareReports(oldPath, newPath string) int {
	old, err := headlineBlock(oldPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-check:", err)
		return 2
	}
	cur, err := headlineBlock(newPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-check:", err)
		return 2
	}
	keys := make([]string, 0, len(old))
	for k := range old {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	failed := 0
	fmt.Printf("%-48s %10s %10s %8s\n", "guarded ratio (higher is better)", "committed", "now", "change")
	for _, k := range keys {
		o, n := old[k], cur[k]
		verdict := ""
		switch {
		case n == 0:
			verdict = "  MISSING"
			failed++
		case n < o*(1-maxRegression):
			verdict = "  REGRESSED"
			failed++
		}
		change := 0.0
		if o > 0 && n > 0 {
			change = (n - o) / o * 100
		}
		fmt.Printf("%-48s %10.3f %10.3f %+7.0f%%%s\n", k, o, n, change, verdict)
	}
	if failed > 0 {
		fmt.Printf("bench-check: %d headline ratio(s) regressed by more than %.0f%% (or are missing)\n", failed, maxRegression*100)
		return 1
	}
	fmt.Println("bench-check: no headline ratio regressed by more than 25%")
	return 0
}
