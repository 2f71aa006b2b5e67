"""Each cell's own image set: counter-based, so any image is made directly."""

import numpy as np

from pytest_gostcnn.performance.images import ImageSet

SHAPE = (8, 6, 3)


def test_an_image_depends_on_its_index_not_on_the_batch_it_comes_in():
    images = ImageSet(SHAPE, seed=1, cell=0)
    assert np.array_equal(images.batch(10, 4)[2], images.batch(12, 1)[0])


def test_two_cells_never_share_images():
    first, second = ImageSet(SHAPE, seed=1, cell=0), ImageSet(SHAPE, seed=1, cell=1)
    assert not np.array_equal(first.batch(0, 3), second.batch(0, 3))


def test_consecutive_images_differ():
    images = ImageSet(SHAPE, seed=1, cell=0).batch(0, 2)
    assert not np.array_equal(images[0], images[1])


def test_images_are_float32_in_the_section_8_range():
    images = ImageSet(SHAPE, seed=3, cell=0).batch(0, 64)
    assert images.dtype == np.float32 and images.shape == (64, *SHAPE)
    assert images.min() >= -127 and images.max() <= 128
    assert images.min() < -100 and images.max() > 100


def test_the_millionth_image_is_made_directly_and_alike_each_time():
    # Counter-based: image 999,999 needs no draw of the images before it.
    images = ImageSet(SHAPE, seed=1, cell=0)
    assert np.array_equal(images.image(999_999), images.batch(999_999, 1)[0])
    assert not np.array_equal(images.image(999_999), images.image(999_998))
