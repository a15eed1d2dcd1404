"""The autoencoder family in PyTorch, for reference checks and benchmarks.

Same layers, same parameter names and layout as kernels/ae/model.h and the ae-model HDF5
file (docs/FORMATS.md), for any input C x H x W and encoder channels c1..ck:
  encoder: for i = 1..k: conv3x3 c(i-1) -> c(i), ReLU, maxpool 2          (c(0) = C)
  decoder: conv3x3 c(k) -> c(k), ReLU; for i = k..2: upsample x2, conv3x3 c(i) -> c(i-1),
           ReLU; upsample x2, conv3x3 c(1) -> C (no activation)
/encoder/conv<i>/weight is encoder_conv<i>.weight, /decoder/conv<j>/weight is
decoder_conv<j>.weight. The default is the seed model, 3x32x32 with channels 256, 128.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

SEED_INPUT_SHAPE = (3, 32, 32)
SEED_ENCODER_CHANNELS = (256, 128)


def layers(input_channels=3, encoder_channels=SEED_ENCODER_CHANNELS):
    """(HDF5 group, attribute name, in, out) per convolution, in parameter order."""
    ch = list(encoder_channels)
    k = len(ch)
    out = []
    prev = input_channels
    for i, c in enumerate(ch, 1):
        out.append((f"/encoder/conv{i}", f"encoder_conv{i}", prev, c))
        prev = c
    out.append(("/decoder/conv1", "decoder_conv1", ch[-1], ch[-1]))
    for j, i in enumerate(range(k, 1, -1), 2):  # decoder conv j maps c(i) -> c(i-1)
        out.append((f"/decoder/conv{j}", f"decoder_conv{j}", ch[i - 1], ch[i - 2]))
    out.append((f"/decoder/conv{k + 1}", f"decoder_conv{k + 1}", ch[0], input_channels))
    return out


# The seed model's layers (kept for callers that predate the architecture parameter).
LAYERS = layers()


class Autoencoder(nn.Module):
    def __init__(self, input_channels=3, encoder_channels=SEED_ENCODER_CHANNELS):
        super().__init__()
        self.input_channels = input_channels
        self.encoder_channels = tuple(int(c) for c in encoder_channels)
        self.layers = layers(input_channels, self.encoder_channels)
        for _, name, cin, cout in self.layers:
            setattr(self, name, nn.Conv2d(cin, cout, 3, padding=1))

    @property
    def depth(self):
        return len(self.encoder_channels)

    def encoder_convs(self):
        return [getattr(self, f"encoder_conv{i}") for i in range(1, self.depth + 1)]

    def decoder_convs(self):
        return [getattr(self, f"decoder_conv{j}") for j in range(1, self.depth + 2)]

    def encode(self, x):
        for conv in self.encoder_convs():
            x = F.max_pool2d(F.relu(conv(x)), 2)
        return x

    def decode(self, z):
        convs = self.decoder_convs()
        z = F.relu(convs[0](z))
        for conv in convs[1:-1]:
            z = F.relu(conv(F.interpolate(z, scale_factor=2, mode="nearest")))
        return convs[-1](F.interpolate(z, scale_factor=2, mode="nearest"))

    def forward(self, x):
        return self.decode(self.encode(x))

    def convs(self):
        return [(group, getattr(self, name)) for group, name, _, _ in self.layers]


def architecture_of(h5file):
    """(input_shape (C,H,W), encoder_channels) from an open h5py.File's root attributes (an
    ae-model, or the output of build/tests/ae-dump-gradients); a file without them is the
    seed model."""
    attrs = h5file.attrs
    shape = tuple(int(v) for v in attrs["input_shape"]) if "input_shape" in attrs else SEED_INPUT_SHAPE
    channels = (tuple(int(v) for v in attrs["encoder_channels"]) if "encoder_channels" in attrs
                else SEED_ENCODER_CHANNELS)
    return shape, channels


def model_for(h5file):
    """An Autoencoder of the architecture an open h5py.File records (see architecture_of)."""
    shape, channels = architecture_of(h5file)
    return Autoencoder(shape[0], channels)


def load_h5(model, h5file):
    """Copies the weights of an open ae-model h5py.File into `model`."""
    with torch.no_grad():
        for group, conv in model.convs():
            conv.weight.copy_(torch.from_numpy(h5file[group + "/weight"][...]))
            conv.bias.copy_(torch.from_numpy(h5file[group + "/bias"][...]))
    return model


def to_input(images_uint8):
    """uint8 [N,C,H,W] numpy -> float tensor, pixels/255 (the same division as the C++ code)."""
    return torch.from_numpy(images_uint8).float() / 255.0
