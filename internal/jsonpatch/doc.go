// Package jsonpatch builds the JSON patches of hyperbatch's mutating webhook. It is hand-written
// for speed (a Pod's admission costs a fraction of what controller-runtime's stock path costs:
// bench/webhook) and fenced off behind four calls:
//
//   - [Diff] patches a request's raw object with every change between two typed renderings of it,
//     before and after defaulting (CREATE);
//   - [CarryOver] patches a new object with values taken back from the old one (UPDATE);
//   - [Doc.Value] reads a value of the patched object for a warning;
//   - [TypeMeta] reads an object's apiVersion and kind as apimachinery does.
//
// # Preconditions
//
// The callers must hold to these; nothing checks them at run time, and breaking one gives a wrong
// patch, not an error:
//
//   - Raw objects passed to Diff and CarryOver are valid JSON objects: the handler has decoded each
//     into its Go type first (sigs.k8s.io/json), which checks that. The parsers here skip the
//     validity check (decodeValidJSONMap, decodeLazyJSONMap).
//   - Diff's before and after are pointers to the same struct type, and after is a deep copy of
//     before with some fields changed (the defaults engine's output). The typed walk
//     (mergeTypedChanges) compares members by memory where both share it; it reproduces
//     encoding/json's rendering and falls back to it wherever it cannot be sure (FuzzTypedChanges).
//   - Neither raw nor the trees built from it are modified: the patched tree shares every
//     unchanged container with the raw object's lazily parsed tree (sharingTree) and copies a
//     container before its first write. A [Doc] is read-only.
//   - Paths are the defaults engine's paths: "spec.queue", "metadata.annotations[key]",
//     "spec.replicatedJobs[1].templateSpec.queue" (bracket contents verbatim).
//
// The code uses unsafe only to identify containers (the address of a map or of a slice's backing
// array) and to compare the memory of equal-typed values.
//
// # Reference implementation
//
// The tests check this package against what it replaces: controller-runtime's stock path
// (admission.PatchResponseFromRaw on json.Marshal of the defaulted object, which uses
// gomodules.xyz/jsonpatch's CreatePatch) for the patch, encoding/json for parsing and encoding,
// and whole renderings for the typed diff. `make fuzz` runs every fuzz target here.
package jsonpatch
