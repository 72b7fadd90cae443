// Command testsummary reads `go test -json` events on stdin and prints a readable report: one line
// per package, the full output of every failed test, and a closing line
// "tests: N passed, N failed, N skipped". It exits non-zero when a test or a package build failed, or
// when no test ran at all.
//
// Several go test runs may be concatenated on stdin (make test runs some suites a second time on
// another control plane): a line "=== suite: <name>" between them names the runs that follow, and
// their packages are reported as "<package> [<name>]", counted in the same closing line.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	outputs := map[string]*strings.Builder{} // package/test -> output
	var passed, failed, skipped int
	var failedTests, failedPkgs []string
	start := time.Now()
	suite := ""
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if name, ok := strings.CutPrefix(string(line), "=== suite: "); ok {
			suite = strings.TrimSpace(name)
			fmt.Printf("\n%s\n", strings.TrimSpace(string(line)))
			continue
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Build errors and other non-JSON lines are passed through as they are.
			fmt.Println(string(line))
			continue
		}
		if suite != "" {
			e.Package += " [" + suite + "]"
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			b, ok := outputs[key]
			if !ok {
				b = &strings.Builder{}
				outputs[key] = b
			}
			b.WriteString(e.Output)
		case "pass", "fail", "skip":
			if e.Test == "" {
				printPackage(e, outputs[key])
				if e.Action == "fail" {
					failedPkgs = append(failedPkgs, e.Package)
				}
				delete(outputs, key)
				continue
			}
			switch e.Action {
			case "pass":
				passed++
			case "skip":
				skipped++
			case "fail":
				failed++
				failedTests = append(failedTests, key)
				fmt.Printf("--- FAIL: %s (%.2fs)\n", key, e.Elapsed)
				if b := outputs[key]; b != nil {
					fmt.Print(indent(b.String()))
				}
			}
			delete(outputs, key)
		}
	}
	sort.Strings(failedTests)
	if len(failedTests) > 0 {
		fmt.Println("\nfailed tests:")
		for _, t := range failedTests {
			fmt.Println("  " + t)
		}
	}
	if len(failedPkgs) > 0 {
		fmt.Println("failed packages: " + strings.Join(failedPkgs, " "))
	}
	fmt.Printf("test wall time: %s\n", time.Since(start).Round(time.Second))
	fmt.Printf("tests: %d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || len(failedPkgs) > 0 || passed == 0 {
		os.Exit(1)
	}
}

func printPackage(e event, out *strings.Builder) {
	switch e.Action {
	case "pass":
		fmt.Printf("ok   %s\t%.1fs\n", e.Package, e.Elapsed)
	case "skip":
		fmt.Printf("?    %s\t[no test files]\n", e.Package)
	case "fail":
		fmt.Printf("FAIL %s\t%.1fs\n", e.Package, e.Elapsed)
		if out != nil {
			fmt.Print(indent(out.String()))
		}
	}
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString("    " + l)
		}
	}
	return b.String()
}
