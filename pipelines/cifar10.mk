# pipelines/cifar10.mk — placeholder; the pipeline lands with the report issue.
CIFAR10_DIR ?=
CIFAR10_URL := https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz
