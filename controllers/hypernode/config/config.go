// Package config reads the HyperNode discovery configuration. The format is Volcano's
// network-topology discovery configuration (the value of the volcano-controller.conf key of Volcano's
// controller ConfigMap), so a Volcano user's file works unchanged:
//
//	networkTopologyDiscovery:
//	  - source: label
//	    enabled: true
//	    interval: 10m
//	    credentials: {secretRef: {name: ufm-credentials, namespace: volcano-system}}
//	    config: {...}   # per source
//
// The package checks the shared fields; each provider decodes and checks its own config block with
// DecodeStrict, so a typo is reported with the field's path.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// DefaultInterval is the period between two full discovery rounds when a source sets none
// (Volcano's default).
const DefaultInterval = time.Hour

// MinInterval is the shortest interval accepted: a shorter one would turn a periodic resync into load
// on the discovery source.
const MinInterval = time.Second

// File is the whole discovery configuration.
type File struct {
	NetworkTopologyDiscovery []Source `json:"networkTopologyDiscovery"`
}

// Source is one discovery source.
type Source struct {
	// Source names the provider (label, ibnetdiscover, ufm).
	Source string `json:"source"`
	// Enabled switches the source on; a disabled source is ignored, including its config.
	Enabled bool `json:"enabled"`
	// Interval is the period of full rounds; 0 means DefaultInterval.
	Interval Duration `json:"interval,omitempty"`
	// Credentials names the Secret holding the source's credentials.
	Credentials *Credentials `json:"credentials,omitempty"`
	// Config is the provider's own block.
	Config map[string]any `json:"config,omitempty"`
}

// Credentials says where a source's credentials come from.
type Credentials struct {
	SecretRef *SecretRef `json:"secretRef,omitempty"`
}

// SecretRef names a Secret.
type SecretRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// Duration is a time.Duration read from "10m"-style strings (as Volcano's YAML decoder reads them) or
// from a number of nanoseconds.
type Duration time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration such as 30s, 10m or 1h", s)
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("%s is not a duration such as 30s, 10m or 1h", b)
	}
	*d = Duration(n)
	return nil
}

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Period is the interval to use: Interval, or DefaultInterval when unset.
func (s Source) Period() time.Duration {
	if s.Interval <= 0 {
		return DefaultInterval
	}
	return time.Duration(s.Interval)
}

// Load reads and checks the file at path.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading discovery config: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("discovery config %s: %w", path, err)
	}
	return f, nil
}

// Parse reads and checks a configuration. Unknown top-level and per-source fields are errors; the
// config block is checked by its provider.
func Parse(b []byte) (*File, error) {
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	f := &File{}
	if err := DecodeStrict(j, f); err != nil {
		return nil, err
	}
	seen := map[string]int{}
	var errs []error
	for i, s := range f.NetworkTopologyDiscovery {
		at := fmt.Sprintf("networkTopologyDiscovery[%d]", i)
		if s.Source == "" {
			errs = append(errs, fmt.Errorf("%s.source is empty: name a provider (label, ibnetdiscover, ufm)", at))
			continue
		}
		if j, dup := seen[s.Source]; dup {
			errs = append(errs, fmt.Errorf("%s.source %q repeats networkTopologyDiscovery[%d]: give each source one entry", at, s.Source, j))
		}
		seen[s.Source] = i
		if s.Interval < 0 || (s.Interval > 0 && time.Duration(s.Interval) < MinInterval) {
			errs = append(errs, fmt.Errorf("%s.interval %s is too short: use at least %s, or leave it out for %s", at, time.Duration(s.Interval), MinInterval, DefaultInterval))
		}
		if c := s.Credentials; c != nil && c.SecretRef != nil && (c.SecretRef.Name == "" || c.SecretRef.Namespace == "") {
			errs = append(errs, fmt.Errorf("%s.credentials.secretRef needs both name and namespace", at))
		}
	}
	return f, errors.Join(errs...)
}

// Enabled returns the enabled sources, in file order.
func (f *File) Enabled() []Source {
	var out []Source
	for _, s := range f.NetworkTopologyDiscovery {
		if s.Enabled {
			out = append(out, s)
		}
	}
	return out
}

// DecodeStrict decodes JSON (or a value already decoded into maps, such as Source.Config) into out
// and fails on an unknown field, naming it.
func DecodeStrict(in any, out any) error {
	var b []byte
	switch v := in.(type) {
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return fmt.Errorf("unknown field %s: check its spelling against docs/discovery.md", f)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("field %s: %s is not a %s", te.Field, te.Value, te.Type)
		}
		return err
	}
	return nil
}
