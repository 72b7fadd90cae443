// Command genmanifests writes hyperbatch's webhook configurations, built by webhook.Configurations in
// Service mode with the default Service, to config/webhook/manifests.yaml (or -o); with -chart it
// writes the Helm chart's template instead (charts/hyperbatch/templates/webhooks.yaml). Tests in
// package webhook fail when the files and the Go disagree.
//
//	go run ./webhook/cmd/genmanifests [-chart]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/hyperbatch/hyperbatch/webhook"
)

func main() {
	out := flag.String("o", "", "file to write (default config/webhook/manifests.yaml, or the chart template with -chart); - for stdout")
	chart := flag.Bool("chart", false, "write the Helm chart's webhook template")
	flag.Parse()
	var y []byte
	var err error
	if *chart {
		y, err = webhook.ChartTemplate()
		if *out == "" {
			*out = webhook.ChartTemplatePath
		}
	} else {
		y, err = webhook.Manifests(webhook.ConfigOptions{})
		if *out == "" {
			*out = "config/webhook/manifests.yaml"
		}
	}
	if err == nil {
		if *out == "-" {
			_, err = os.Stdout.Write(y)
		} else {
			err = os.WriteFile(*out, y, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genmanifests:", err)
		os.Exit(1)
	}
}
