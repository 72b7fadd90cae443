package webhook

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The Helm chart's webhook template is generated from Configurations; it must not drift.
func TestChartTemplateInSync(t *testing.T) {
	want, err := ChartTemplate()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", ChartTemplatePath)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run `go run ./webhook/cmd/genmanifests -chart`", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is out of date with webhook.Configurations: run `go run ./webhook/cmd/genmanifests -chart`", path)
	}
}
