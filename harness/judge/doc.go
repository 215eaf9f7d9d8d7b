// Package judge derives the verdict of a run from its recorded history alone,
// as Jepsen's checkers read a history: the evidence (FromHistory, a fold over
// the entries), the diagnoses, the outcome and the expectation checks.
//
// Each diagnosis code is one file, code_<name>.go, registering one Code: its
// name, what it means, how the evidence shows it and its remedy. Adding a code
// touches that file and its test and nothing else: the scenario validator
// (through chaos.Catalogue), Diagnose, Remedy, the doctor and `talchaos list
// --diagnoses` all read Codes.
package judge
