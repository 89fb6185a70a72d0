package benchreport

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCPUModel(t *testing.T) {
	info := "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\n" +
		"stepping\t: 1\n\nprocessor\t: 1\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: other\n"
	require.Equal(t, "AMD EPYC, family 25 model 1", cpuModel(info))
	require.Equal(t, "Some ARM", cpuModel("processor\t: 0\nmodel name\t: Some ARM\n"))
	require.Equal(t, "unknown CPU", cpuModel("processor\t: 0\nBogoMIPS\t: 50.00\n"))
}
