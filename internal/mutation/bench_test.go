package mutation

import (
	"reflect"
	"testing"
)

// benchObjects are an MR-sized pair, about 50 leaves of spec, with a few
// changes of every kind, as the function sees them once per composed
// resource and reconcile.
func benchObjects(b *testing.B) (observed, desired map[string]any, applied Applied) {
	b.Helper()
	const o = `{"apiVersion":"rds.aws.upbound.io/v1beta1","kind":"Instance","metadata":{"name":"db","annotations":{"kausality.io/applied":"{}"}},
"spec":{"managementPolicies":["Observe"],"deletionPolicy":"Delete","providerConfigRef":{"name":"default"},
"writeConnectionSecretToRef":{"name":"db-conn","namespace":"crossplane-system"},
"forProvider":{"region":"eu-west-1","instanceClass":"db.t3.small","engine":"postgres","engineVersion":"15.4","allocatedStorage":20,
"maxAllocatedStorage":100,"storageType":"gp3","storageEncrypted":true,"kmsKeyId":"arn:aws:kms:eu-west-1:123:key/abc","username":"admin",
"passwordSecretRef":{"name":"db-pw","namespace":"crossplane-system","key":"password"},"dbName":"app","port":5432,"multiAz":false,
"publiclyAccessible":false,"skipFinalSnapshot":true,"backupRetentionPeriod":7,"backupWindow":"03:00-04:00","maintenanceWindow":"Mon:04:00-Mon:05:00",
"autoMinorVersionUpgrade":true,"applyImmediately":false,"deletionProtection":true,"copyTagsToSnapshot":true,"performanceInsightsEnabled":false,
"monitoringInterval":0,"parameterGroupName":"default.postgres15","dbSubnetGroupName":"db-subnets","caCertIdentifier":"rds-ca-rsa2048-g1",
"vpcSecurityGroupIds":["sg-1","sg-2"],"enabledCloudwatchLogsExports":["postgresql","upgrade"],
"tags":{"team":"payments","env":"prod","cost-center":"1234","kausality.io/managed":"true","owner":"alice@example.com"},
"restoreToPointInTime":[{"restoreTime":"2026-01-01T00:00:00Z","useLatestRestorableTime":false}],
"blueGreenUpdate":[{"enabled":false}],"iamDatabaseAuthenticationEnabled":false,"licenseModel":"postgresql-license","networkType":"IPV4"}},
"status":{"atProvider":{"id":"db-123","address":"db.example.com"}}}`
	d := `{"apiVersion":"rds.aws.upbound.io/v1beta1","kind":"Instance","metadata":{"name":"db"},
"spec":{"managementPolicies":["*"],"deletionPolicy":"Delete","providerConfigRef":{"name":"default"},
"writeConnectionSecretToRef":{"name":"db-conn","namespace":"crossplane-system"},
"forProvider":{"region":"eu-west-1","instanceClass":"db.t3.large","engine":"postgres","engineVersion":"15.4","allocatedStorage":50,
"maxAllocatedStorage":100,"storageType":"gp3","storageEncrypted":true,"kmsKeyId":"arn:aws:kms:eu-west-1:123:key/abc","username":"admin",
"passwordSecretRef":{"name":"db-pw","namespace":"crossplane-system","key":"password"},"dbName":"app","port":5432,"multiAz":true,
"publiclyAccessible":false,"skipFinalSnapshot":true,"backupRetentionPeriod":7,"backupWindow":"03:00-04:00","maintenanceWindow":"Mon:04:00-Mon:05:00",
"autoMinorVersionUpgrade":true,"applyImmediately":false,"deletionProtection":true,"copyTagsToSnapshot":true,"performanceInsightsEnabled":false,
"monitoringInterval":0,"parameterGroupName":"default.postgres15","dbSubnetGroupName":"db-subnets","caCertIdentifier":"rds-ca-rsa2048-g1",
"vpcSecurityGroupIds":["sg-1","sg-2","sg-3"],"enabledCloudwatchLogsExports":["postgresql"],
"tags":{"team":"payments","env":"prod","cost-center":"1234","kausality.io/managed":"true","owner":"bob@example.com","ticket":"INFRA-1"},
"restoreToPointInTime":[{"restoreTime":"2026-01-01T00:00:00Z","useLatestRestorableTime":false}],
"blueGreenUpdate":[{"enabled":false}],"iamDatabaseAuthenticationEnabled":false,"networkType":"IPV4"}}}`
	observed, desired = obj(b, o), obj(b, d)
	applied = Record("spec", observed["spec"], skipManagementPolicies)
	return observed, desired, applied
}

func skipManagementPolicies(p string) bool { return p == "spec.managementPolicies" }

func BenchmarkDiff(b *testing.B) {
	observed, desired, applied := benchObjects(b)
	if n := len(applied); n < 45 {
		b.Fatalf("benchmark object has %d leaves, want about 50", n)
	}
	opts := []DiffOption{WithOwned(applied.Owns), WithSkip(skipManagementPolicies)}
	b.ReportAllocs()
	for b.Loop() {
		if ms := Diff("spec", observed["spec"], desired["spec"], opts...); len(ms) == 0 {
			b.Fatal("no mutations")
		}
	}
}

// BenchmarkDiffReference is the floor Diff is measured against:
// reflect.DeepEqual on the same objects, which only says that they differ.
// It stops at the first difference it meets, so FullWalk also compares
// desired with a copy of itself, which visits every leaf as Diff does.
func BenchmarkDiffReference(b *testing.B) {
	observed, desired, _ := benchObjects(b)
	b.Run("SameObjects", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if reflect.DeepEqual(observed["spec"], desired["spec"]) {
				b.Fatal("equal")
			}
		}
	})
	b.Run("FullWalk", func(b *testing.B) {
		same := deepCopy(desired["spec"])
		b.ReportAllocs()
		for b.Loop() {
			if !reflect.DeepEqual(same, desired["spec"]) {
				b.Fatal("not equal")
			}
		}
	})
}
