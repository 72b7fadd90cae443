// Command genmanifests writes hyperbatch's webhook configurations, built by webhook.Configurations in
// Service mode with the default Service, to config/webhook/manifests.yaml (or -o). A test in package
// webhook fails when the file and the Go disagree.
//
//	go run ./webhook/cmd/genmanifests
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/hyperbatch/hyperbatch/webhook"
)

func main() {
	out := flag.String("o", "config/webhook/manifests.yaml", "file to write; - for stdout")
	flag.Parse()
	y, err := webhook.Manifests(webhook.ConfigOptions{})
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
