"""Region-of-interest max pooling (PaddlePaddle's ``roi_pool``, Fast R-CNN): each region of a
feature map is cut into ``pooled_height x pooled_width`` bins and each bin max-pooled.

Input 0 is the feature map (``C x H x W`` per image); input 1 holds one region per row,
``[image index, x1, y1, x2, y2]`` in input-image coordinates, scaled by ``spatial_scale`` and
rounded (ends included). Bin ``(i, j)`` of a region of height ``h`` covers rows
``floor(i h / ph) .. ceil((i+1) h / ph)`` of it (clipped to the map); an empty bin is 0. The
output has one row per region, ``C * ph * pw`` wide; backward sends each bin's gradient to its
maximum.
"""

from __future__ import annotations

import math

import numpy as np

from sculler.backend import get_array_module, to_numpy
from sculler.core.expression import LayerOutput, as_inputs, make_layer
from sculler.core.faces import layer_function
from sculler.core.layer import register_layer
from sculler.layers.image import ImageLayer, channels_attr, image_geometry, set_output_geometry
from sculler.validate import integer, number


@register_layer("roi_pool")
class ROIPoolLayer(ImageLayer):
    """Max pooling of ``pooled_height x pooled_width`` bins over each region of interest;
    attrs ``pooled_width``, ``pooled_height``, ``spatial_scale``."""

    min_inputs = max_inputs = 2
    image_inputs = 1

    @classmethod
    def infer_size(cls, config, inputs):
        if inputs[1].size < 5:
            raise ValueError(f"layer {config.name!r} (roi_pool): input 1 {inputs[1].name!r} "
                             "holds [image index, x1, y1, x2, y2] per region, so it needs width "
                             f">= 5, got {inputs[1].size}")
        c = image_geometry(config, inputs)[0]
        return set_output_geometry(config, c, int(config.attrs["pooled_height"]),
                                   int(config.attrs["pooled_width"]))

    def _bins(self, rois, n_images: int, h: int, w: int):
        """Per region: its image and the (row, column) slices of every bin."""
        ph, pw = int(self.attr("pooled_height")), int(self.attr("pooled_width"))
        scale = float(self.attr("spatial_scale"))
        out = []
        for k, roi in enumerate(to_numpy(rois)):
            image = int(roi[0])
            if not 0 <= image < n_images:
                raise ValueError(f"layer {self.name!r} (roi_pool): region {k} names image "
                                 f"{image}, but the batch has {n_images} images")
            x1, y1, x2, y2 = (int(round(v * scale)) for v in roi[1:5])
            rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
            bins = [(slice(min(max(y1 + math.floor(i * rh / ph), 0), h),
                           min(max(y1 + math.ceil((i + 1) * rh / ph), 0), h)),
                     slice(min(max(x1 + math.floor(j * rw / pw), 0), w),
                           min(max(x1 + math.ceil((j + 1) * rw / pw), 0), w)))
                    for i in range(ph) for j in range(pw)]
            out.append((image, bins))
        return out

    def forward(self, pass_type: str) -> None:
        super().forward(pass_type)
        x = self.input_image(0)
        rois = self.get_input_value(1)
        n, c, h, w = x.shape
        self._regions = self._bins(rois, n, h, w)
        out = self.reserve_output(len(self._regions), self.size)
        bins_out = out.reshape(len(self._regions), c, -1)
        self._argmax = []
        for k, (image, bins) in enumerate(self._regions):
            picks = []
            for b, (rows, cols) in enumerate(bins):
                patch = x[image, :, rows, cols].reshape(c, -1)
                if patch.shape[1] == 0:
                    bins_out[k, :, b] = 0
                    picks.append(None)
                    continue
                best = patch.argmax(axis=1)
                bins_out[k, :, b] = patch[np.arange(c), best]
                picks.append(best)
            self._argmax.append(picks)
        self.forward_activation()

    def backward(self, callback=None) -> None:
        self.backward_activation()
        gx = self.input_grad_image(0)
        if gx is None:
            return
        c = gx.shape[1]
        dy = self.output.grad.reshape(len(self._regions), c, -1)
        channels = get_array_module(gx).arange(c)
        for k, (image, bins) in enumerate(self._regions):
            for b, ((rows, cols), best) in enumerate(zip(bins, self._argmax[k])):
                if best is None:
                    continue
                width = cols.stop - cols.start
                r, q = rows.start + best // width, cols.start + best % width
                gx[image, channels, r, q] += dy[k, :, b]  # one position per channel


@layer_function(v1="roi_pool_layer", types=("roi_pool",), prefix="roi_pool")
def roi_pool(input: LayerOutput, rois: LayerOutput, pooled_width: int,  # noqa: A002
             pooled_height: int, spatial_scale: float, num_channels: int | None = None,
             name: str | None = None) -> LayerOutput:
    """Max-pool each region of ``rois`` ([image, x1, y1, x2, y2] rows) of the feature map
    into ``pooled_height x pooled_width`` bins."""
    attrs = {"pooled_width": integer(pooled_width, "roi_pool: pooled_width", minimum=1),
             "pooled_height": integer(pooled_height, "roi_pool: pooled_height", minimum=1),
             "spatial_scale": number(spatial_scale, "roi_pool: spatial_scale", low=0.0),
             **channels_attr(num_channels, "roi_pool")}
    return make_layer("roi_pool", as_inputs([input, rois], "roi_pool"), name=name,
                      bias_attr=False, attrs=attrs)


