package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// WriteResultSection replaces the section between the lines "# begin <section>" and "# end <section>"
// of bench/results/<file> with body, or appends the section when the file lacks it, so benchmarks in
// different packages can share one results file.
func WriteResultSection(file, section, body string) error {
	path := filepath.Join(RepoRoot(), "bench", "results", file)
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	begin, end := "# begin "+section+"\n", "# end "+section+"\n"
	text := string(old)
	block := begin + strings.TrimRight(body, "\n") + "\n" + end
	if i, j := strings.Index(text, begin), strings.Index(text, end); i >= 0 && j > i {
		text = text[:i] + block + text[j+len(end):]
	} else {
		if text != "" && !strings.HasSuffix(text, "\n\n") {
			text += "\n"
		}
		text += block
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// LoadAverage is the machine's 1, 5 and 15 minute load averages ("1.02/0.88/0.75"), "?" when
// /proc/loadavg cannot be read: benchmark results say how busy the shared machine was.
func LoadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], "/")
}
