package v1alpha1

//go:generate ../../../../../.cache/bin/controller-gen object:headerFile=../../../../../hack/boilerplate.go.txt paths=. crd:crdVersions=v1 output:crd:artifacts:config=../../../package/crds
