package scenario_test

import (
	"os"
	"testing"

	"github.com/talchaos/talchaos/harness/chaos"
)

func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile("../../scenarios/too-many-learners.yaml")
	if err != nil {
		b.Fatal(err)
	}

	b.ReportAllocs()

	for b.Loop() {
		if _, err := chaos.Parse("too-many-learners.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}
