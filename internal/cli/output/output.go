// Package output writes kubectl-hyperbatch's reports: a table for people (the default), JSON or
// YAML through k8s.io/cli-runtime's printers for scripts (-o json|yaml).
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/hyperbatch/hyperbatch/internal/cli/exitcode"
)

// APIVersion is the apiVersion of the reports' JSON and YAML forms.
const APIVersion = "cli.hyperbatch.dev/v1alpha1"

// Format is the -o flag.
type Format string

// The formats.
const (
	Table Format = "table"
	JSON  Format = "json"
	YAML  Format = "yaml"
)

// AddFlag adds -o/--output to flags.
func AddFlag(flags *pflag.FlagSet, f *Format) {
	*f = Table
	flags.StringVarP((*string)(f), "output", "o", string(Table), "Output format: table, json or yaml.")
}

// Validate refuses an unknown format, naming the valid ones.
func (f Format) Validate() error {
	switch f {
	case Table, JSON, YAML, "":
		return nil
	}
	return exitcode.Usagef("--output %q is not a format; use one of table, json, yaml", string(f))
}

// Report is one command's result: an object (its TypeMeta set by Meta) that can also write itself
// as tables.
type Report interface {
	runtime.Object
	WriteTable(w io.Writer) error
}

// Meta is the TypeMeta of a report of this kind.
func Meta(kind string) metav1.TypeMeta { return metav1.TypeMeta{APIVersion: APIVersion, Kind: kind} }

// Print writes r in format f.
func Print(w io.Writer, f Format, r Report) error {
	switch f {
	case JSON:
		return (&printers.JSONPrinter{}).PrintObj(r, w)
	case YAML:
		return (&printers.YAMLPrinter{}).PrintObj(r, w)
	}
	sw := Sticky(w)
	if err := r.WriteTable(sw); err != nil {
		return err
	}
	return sw.Err
}

// StickyWriter remembers the first write error and writes nothing after it, so a report's many
// lines need one error check (Print makes one for WriteTable).
type StickyWriter struct {
	W   io.Writer
	Err error
}

// Sticky wraps w, or returns it when it is a *StickyWriter already.
func Sticky(w io.Writer) *StickyWriter {
	if s, ok := w.(*StickyWriter); ok {
		return s
	}
	return &StickyWriter{W: w}
}

func (s *StickyWriter) Write(p []byte) (int, error) {
	if s.Err != nil {
		return 0, s.Err
	}
	n, err := s.W.Write(p)
	if err != nil {
		s.Err = err
	}
	return n, err
}

// Printf writes a formatted line; an error stays in Err.
func (s *StickyWriter) Printf(format string, a ...any) { _, _ = fmt.Fprintf(s, format, a...) }

// Println writes its operands and a newline; an error stays in Err.
func (s *StickyWriter) Println(a ...any) { _, _ = fmt.Fprintln(s, a...) }

// DeepCopy copies a report through JSON (reports are plain data); for DeepCopyObject.
func DeepCopy[T any](in *T) *T {
	out := new(T)
	b, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		panic(fmt.Sprintf("copying a report: %v", err))
	}
	return out
}

// Tab writes rows as aligned columns (cli-runtime's tab writer, as kubectl get does); the first
// row is the header. A nil or empty cell is written "-".
func Tab(w io.Writer, rows [][]string) error {
	tw := printers.GetNewTabWriter(w)
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			if c == "" {
				c = "-"
			}
			cells[i] = c
		}
		if _, err := fmt.Fprintln(tw, strings.Join(cells, "\t")); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// List joins names for a table cell: "a, b, c"; "" when there are none.
func List(names []string) string { return strings.Join(names, ", ") }
