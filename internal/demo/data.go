package demo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// allowCallbacks lets the demo's receiver host be a push callback: it adds
// host to data.writ.config.callbacks.tenants[tenant] and to
// callbacks.allow_http_hosts (the receiver speaks plain http) in the policy
// data file, decoding and encoding it as JSON. A file whose shape changed is
// an error that names what is missing.
func allowCallbacks(file, tenant, host string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers stay as written
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("policy data %s: %w", file, err)
	}
	callbacks, err := object(doc, "writ", "config", "callbacks")
	if err == nil {
		var tenants map[string]any
		if tenants, err = object(callbacks, "tenants"); err == nil {
			err = addTo(tenants, tenant, host, "writ.config.callbacks.tenants")
		}
	}
	if err == nil {
		err = addTo(callbacks, "allow_http_hosts", host, "writ.config.callbacks")
	}
	if err != nil {
		return fmt.Errorf("the shipped policy data changed shape, so the demo cannot allow its push receiver: %w", err)
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(out, '\n'), 0o600)
}

// object walks m down path, every step an object.
func object(m map[string]any, path ...string) (map[string]any, error) {
	for i, key := range path {
		next, ok := m[key].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s is not an object", strings.Join(path[:i+1], "."))
		}
		m = next
	}
	return m, nil
}

// addTo appends s to the list m[key] unless it is there already.
func addTo(m map[string]any, key, s, where string) error {
	list, ok := m[key].([]any)
	if !ok {
		return fmt.Errorf("%s.%s is not a list", where, key)
	}
	if !slices.Contains(list, any(s)) {
		m[key] = append(list, s)
	}
	return nil
}
