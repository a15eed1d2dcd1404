"""The seeds' autoencoder in PyTorch, for reference checks and benchmarks.

Same layers, same parameter names and layout as kernels/ae/model.h and the ae-model
HDF5 file (docs/FORMATS.md): /encoder/conv1/weight is encoder_conv1.weight, etc.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

# (HDF5 group, attribute name, in, out) in parameter order.
LAYERS = [
    ("/encoder/conv1", "encoder_conv1", 3, 256),
    ("/encoder/conv2", "encoder_conv2", 256, 128),
    ("/decoder/conv1", "decoder_conv1", 128, 128),
    ("/decoder/conv2", "decoder_conv2", 128, 256),
    ("/decoder/conv3", "decoder_conv3", 256, 3),
]


class Autoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        for _, name, cin, cout in LAYERS:
            setattr(self, name, nn.Conv2d(cin, cout, 3, padding=1))

    def encode(self, x):
        x = F.max_pool2d(F.relu(self.encoder_conv1(x)), 2)
        return F.max_pool2d(F.relu(self.encoder_conv2(x)), 2)

    def decode(self, z):
        z = F.interpolate(F.relu(self.decoder_conv1(z)), scale_factor=2, mode="nearest")
        z = F.interpolate(F.relu(self.decoder_conv2(z)), scale_factor=2, mode="nearest")
        return self.decoder_conv3(z)

    def forward(self, x):
        return self.decode(self.encode(x))

    def convs(self):
        return [(group, getattr(self, name)) for group, name, _, _ in LAYERS]


def load_h5(model, h5file):
    """Copies the weights of an open ae-model h5py.File into `model`."""
    with torch.no_grad():
        for group, conv in model.convs():
            conv.weight.copy_(torch.from_numpy(h5file[group + "/weight"][...]))
            conv.bias.copy_(torch.from_numpy(h5file[group + "/bias"][...]))
    return model


def to_input(images_uint8):
    """uint8 [N,3,32,32] numpy → float tensor, pixels/255 (the same division as the C++ code)."""
    return torch.from_numpy(images_uint8).float() / 255.0
