# pipelines/datasets.mk — which dataset `make pipeline` runs on, and its defaults (included
# by pipelines/pipeline.mk before its own defaults, so the values here win over those).
#
#   make pipeline                                   CIFAR-10 (data/cifar10.h5, data/run)
#   make pipeline DATASET=fashion-mnist             data/fashion-mnist.h5, data/run-fashion-mnist
#   make pipeline DATASET=mnist MNIST_DIR=~/mnist   a local copy of the four IDX files
#   make pipeline DATASET=cifar100 CIFAR100_LABELS=coarse
#   make pipeline DATASET=folder FOLDER=photos/ FOLDER_IMAGE_SIZE=64
#
# Each dataset has its own dataset file ($(DATA_DIR)/$(DATASET).h5; an image folder DIR:
# folder-DIR.h5) and run folder (data/run-$(DATASET); CIFAR-10 keeps data/run), so runs of different datasets never
# overwrite each other. Any variable given on the command line still wins.
#
# Per-dataset defaults (why: docs/DECISIONS.md):
#   cifar10, cifar100, folder   3x32x32 (folder: resized to FOLDER_IMAGE_SIZE)  256,128  20 epochs  batch 64
#   fashion-mnist, mnist        1x28x28                                          128,64   10 epochs  batch 128
# On 28x28 the two pools give a 7x7 latent; 64 channels of it (3,136 features, four times
# the raw pixels) keep the SVM's kernel cost — proportional to the feature count — at
# 60,000 training rows near CIFAR-10's, and a 1-channel image needs fewer filters than RGB.

DATASET  ?= cifar10
DATA_DIR ?= data
PL_DATASETS := cifar10 fashion-mnist mnist cifar100 folder
ifeq ($(filter $(DATASET),$(PL_DATASETS)),)
$(error DATASET=$(DATASET): expected one of $(PL_DATASETS))
endif

ifneq ($(filter $(DATASET),fashion-mnist mnist),)
EPOCHS           ?= 10
BATCH            ?= 128
ENCODER_CHANNELS ?= 128,64
endif
# The name of the dataset file and run folder: the dataset, or for image folders the
# folder's own name too (two folders, two datasets).
PL_NAME := $(if $(filter folder,$(DATASET)),folder-$(notdir $(abspath $(FOLDER))),$(DATASET))
ifneq ($(DATASET),cifar10)
RUN_DIR ?= data/run-$(PL_NAME)
endif

# ---- sources -----------------------------------------------------------------------------
# Fashion-MNIST: FASHION_MNIST_DIR, else Debian's dataset-fashion-mnist (installed with apt
# when missing), else the official download. The checksums are of the *decompressed* files
# (sha256), the same for the official .gz files and Debian's recompressed ones.
FASHION_MNIST_DIR ?=
FASHION_MNIST_DEB := /usr/share/datasets/fashion-mnist
FASHION_MNIST_URL ?= http://fashion-mnist.s3-website.eu-central-1.amazonaws.com
FASHION_MNIST_SHA256 := \
  train-images-idx3-ubyte.gz=c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888 \
  train-labels-idx1-ubyte.gz=bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9 \
  t10k-images-idx3-ubyte.gz=5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b \
  t10k-labels-idx1-ubyte.gz=0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34
# MNIST: MNIST_DIR, else the download (torchvision's mirror of Yann LeCun's files; the md5s
# are of the official .gz files, as torchvision lists them).
MNIST_DIR ?=
MNIST_URL ?= https://ossci-datasets.s3.amazonaws.com/mnist
MNIST_MD5 := \
  train-images-idx3-ubyte.gz=f68b3c2dcbeaaa9fbdd348bbdeb94873 \
  train-labels-idx1-ubyte.gz=d53e105ee54ea40749a09fcbcd1e9432 \
  t10k-images-idx3-ubyte.gz=9fb629c4189551a2d022fa330f9573f3 \
  t10k-labels-idx1-ubyte.gz=ec29112dd5afa0611ce80d1b7f02629c
# CIFAR-100: CIFAR100_DIR (the cifar-100-binary folder or the .tar.gz), else the download.
CIFAR100_DIR    ?=
CIFAR100_URL    ?= https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz
CIFAR100_MD5    ?= 03b5dce01913d631647c71ecec9e9cb8
CIFAR100_LABELS ?= fine
# Image folders (DIR/train/CLASS/*, DIR/test/CLASS/*): FOLDER, resized to FOLDER_IMAGE_SIZE
# (H or HxW; empty: the images' own size, which must then agree); FOLDER_COLOR auto|rgb|gray.
FOLDER            ?=
FOLDER_IMAGE_SIZE ?= 32
FOLDER_COLOR      ?= auto
# Extra cifar-convert options (a data-stage parameter), e.g. CONVERT_FLAGS=--skip-bad.
CONVERT_FLAGS     ?=

IDX_FILES := train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz

# The one download-and-verify recipe (shell text for a recipe line), shared by every
# dataset: $(1) URL, $(2) destination file, $(3) the checksum's name (md5, sha256), $(4) a
# command printing the checksum of the file "$$part", $(5) the expected checksum, $(6) the
# setting that names a local copy instead. It downloads to a hidden .part name beside the
# destination, checks, and renames: the destination only ever exists verified.
define pl_download
dest=$(2); part="$$(dirname "$$dest")/.$$(basename "$$dest").part"; rm -f "$$part"; \
	  echo "data: downloading $(1)"; \
	  if command -v curl >/dev/null 2>&1; then curl -fL --retry 3 --connect-timeout 30 -o "$$part" "$(1)"; \
	  elif command -v wget >/dev/null 2>&1; then wget -q -O "$$part" "$(1)"; \
	  else echo "data: neither curl nor wget is installed" >&2; false; fi \
	  || { rm -f "$$part"; echo "data: download of $(1) failed; to use a local copy: make pipeline DATASET=$(DATASET) $(6)=/path/to/it" >&2; exit 1; }; \
	  sum=$$($(4) | cut -d' ' -f1); \
	  if [ "$$sum" != "$(5)" ]; then rm -f "$$part"; \
	    echo "data: $(1): $(3) $$sum, expected $(5): download removed" >&2; exit 1; fi; \
	  mv "$$part" "$$dest"
endef

# $(1) folder, $(2) base URL, $(3) "file=sum" list, $(4) the checksum's name, $(5) the
# checksum command, $(6) "gz" to sum the decompressed bytes, $(7) the local-copy setting:
# the four IDX files, each through pl_download (those already there are kept).
define pl_fetch_idx
	@mkdir -p $(1); for pair in $(3); do f=$${pair%%=*}; want=$${pair#*=}; \
	  [ -f "$(1)/$$f" ] && continue; \
	  $(call pl_download,$(2)/$$f,"$(1)/$$f",$(4),$(if $(filter gz,$(6)),gzip -dc "$$part" | $(5),$(5) "$$part"),$$want,$(7)) || exit 1; done
endef

PL_FETCH_DIR := $(DATA_DIR)/$(PL_NAME)-source

ifeq ($(DATASET),fashion-mnist)
ifneq ($(strip $(FASHION_MNIST_DIR)),)
PL_SOURCE := $(FASHION_MNIST_DIR)
else ifneq ($(wildcard $(FASHION_MNIST_DEB)/train-images-idx3-ubyte.gz),)
PL_SOURCE := $(FASHION_MNIST_DEB)
else
# Not installed: the source is fetched by the rule below (apt, else the download) into a
# folder of links or files, so the data rule has one fixed input either way.
PL_SOURCE := $(PL_FETCH_DIR)
$(PL_FETCH_DIR)/.done:
	@mkdir -p $(@D); \
	if apt-cache show dataset-fashion-mnist >/dev/null 2>&1; then \
	  echo "data: installing Debian's dataset-fashion-mnist"; \
	  if [ "$$(id -u)" -eq 0 ]; then apt-get install -y dataset-fashion-mnist; \
	  else sudo apt-get install -y dataset-fashion-mnist; fi || echo "data: apt-get failed; downloading instead" >&2; \
	fi; \
	if [ -f $(FASHION_MNIST_DEB)/train-images-idx3-ubyte.gz ]; then \
	  for f in $(IDX_FILES); do ln -sf $(FASHION_MNIST_DEB)/$$f $(@D)/$$f; done; fi
	$(call pl_fetch_idx,$(@D),$(FASHION_MNIST_URL),$(FASHION_MNIST_SHA256),sha256,sha256sum,gz,FASHION_MNIST_DIR)
	@touch $@
endif
PL_SOURCE_ID := $(if $(strip $(FASHION_MNIST_DIR)),$(abspath $(FASHION_MNIST_DIR)),fashion-mnist)
endif

ifeq ($(DATASET),mnist)
PL_SOURCE    := $(if $(strip $(MNIST_DIR)),$(MNIST_DIR),$(PL_FETCH_DIR))
PL_SOURCE_ID := $(if $(strip $(MNIST_DIR)),$(abspath $(MNIST_DIR)),$(MNIST_URL))
ifeq ($(strip $(MNIST_DIR)),)
$(PL_FETCH_DIR)/.done:
	$(call pl_fetch_idx,$(@D),$(MNIST_URL),$(MNIST_MD5),md5,md5sum,,MNIST_DIR)
	@touch $@
endif
endif

ifeq ($(DATASET),cifar100)
CIFAR100_TGZ := $(DATA_DIR)/cifar-100-binary.tar.gz
PL_SOURCE    := $(if $(strip $(CIFAR100_DIR)),$(CIFAR100_DIR),$(CIFAR100_TGZ))
PL_SOURCE_ID := $(if $(strip $(CIFAR100_DIR)),$(abspath $(CIFAR100_DIR)),$(CIFAR100_URL))
PL_CONVERT_FLAGS := --labels $(CIFAR100_LABELS)
ifeq ($(strip $(CIFAR100_DIR)),)
$(CIFAR100_TGZ):
	@mkdir -p $(@D)
	@$(call pl_download,$(CIFAR100_URL),$@,md5,md5sum "$$part",$(CIFAR100_MD5),CIFAR100_DIR)
endif
endif

ifeq ($(DATASET),folder)
ifeq ($(strip $(FOLDER)),)
ifneq ($(filter pipeline data,$(MAKECMDGOALS)),)
$(error DATASET=folder needs FOLDER=DIR (DIR/train/CLASS/*.png|jpg, DIR/test/CLASS/*))
endif
endif
PL_SOURCE    := $(FOLDER)
PL_SOURCE_ID := $(abspath $(FOLDER))
PL_CONVERT_FLAGS := --format folder $(if $(strip $(FOLDER_IMAGE_SIZE)),--image-size $(FOLDER_IMAGE_SIZE)) --color $(FOLDER_COLOR)
endif

# The input format each dataset needs (cifar-convert --format), the variable that names its
# source, and the format in words: the data rule forces the format and, when that fails,
# says what the source is instead (a Fashion-MNIST folder given as CIFAR10_DIR is an error
# naming both, never converted into cifar10.h5).
PL_FORMAT_cifar10         := cifar10
PL_FORMAT_fashion-mnist   := idx
PL_FORMAT_mnist           := idx
PL_FORMAT_cifar100        := cifar100
PL_FORMAT_folder          := folder
PL_FORMAT                 := $(PL_FORMAT_$(DATASET))
PL_FORMAT_WORDS_cifar10   := CIFAR-10 binary batches
PL_FORMAT_WORDS_idx       := MNIST-style IDX files
PL_FORMAT_WORDS_cifar100  := CIFAR-100 binary batches
PL_FORMAT_WORDS_folder    := an image folder (train/CLASS/*, test/CLASS/*)
PL_SOURCE_VAR_cifar10       := CIFAR10_DIR
PL_SOURCE_VAR_fashion-mnist := FASHION_MNIST_DIR
PL_SOURCE_VAR_mnist         := MNIST_DIR
PL_SOURCE_VAR_cifar100      := CIFAR100_DIR
PL_SOURCE_VAR_folder        := FOLDER
PL_SOURCE_VAR               := $(PL_SOURCE_VAR_$(DATASET))

# What the data rule depends on besides its stamp: the source's files (a fetched source:
# its .done marker, so the fetch runs first and once).
ifneq ($(filter $(DATASET),fashion-mnist mnist),)
PL_SOURCE_FILES := $(if $(filter $(PL_FETCH_DIR),$(PL_SOURCE)),$(PL_FETCH_DIR)/.done,$(wildcard $(addprefix $(PL_SOURCE)/,$(IDX_FILES) $(IDX_FILES:.gz=))))
endif
ifeq ($(DATASET),cifar100)
PL_SOURCE_FILES := $(if $(wildcard $(PL_SOURCE)/.),$(wildcard $(PL_SOURCE)/*.bin $(PL_SOURCE)/*.txt),$(if $(strip $(CIFAR100_DIR)),$(wildcard $(PL_SOURCE)),$(PL_SOURCE)))
endif
ifeq ($(DATASET),folder)
# Image folders can be large; the stamp (source path + options) decides, plus the folder's
# own modification times of train/ and test/ (adding or removing a class or file there).
PL_SOURCE_FILES := $(wildcard $(PL_SOURCE)/train $(PL_SOURCE)/test $(PL_SOURCE)/train/* $(PL_SOURCE)/test/*)
endif
