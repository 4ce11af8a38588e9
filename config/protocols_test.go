package config

// The protocol table registers the protocols agents[].protocol may name
// (adapters/names): every program that loads a config links it, and so do
// these tests.
import _ "github.com/writ-authz/writ/adapters"
