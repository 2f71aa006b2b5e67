"""The round's data: images and output residual from a key drawn in the round's setup."""

import random

import numpy as np

from pytest_gostcnn.performance.images import ImageSet, residual, round_key, seed_key

SHAPE = (8, 6, 3)


def test_an_image_depends_on_its_index_not_on_the_batch_it_comes_in():
    images = ImageSet(SHAPE, key=12345)
    assert np.array_equal(images.batch(10, 4)[2], images.batch(12, 1)[0])


def test_two_keys_never_share_images():
    first, second = ImageSet(SHAPE, seed_key(1, 0)), ImageSet(SHAPE, seed_key(1, 1))
    assert not np.array_equal(first.batch(0, 3), second.batch(0, 3))


def test_consecutive_images_differ():
    images = ImageSet(SHAPE, key=7).batch(0, 2)
    assert not np.array_equal(images[0], images[1])


def test_images_are_float32_in_the_section_8_range():
    images = ImageSet(SHAPE, key=3).batch(0, 64)
    assert images.dtype == np.float32 and images.shape == (64, *SHAPE)
    assert images.min() >= -127 and images.max() <= 128
    assert images.min() < -100 and images.max() > 100


def test_a_rounds_key_is_128_bits_of_fresh_randomness_each_time():
    # The operating system's by default: nothing in the process holds the next one.
    keys = {round_key() for _ in range(100)}
    assert len(keys) == 100 and all(0 <= key < 2**128 for key in keys)
    assert max(keys) > 2**120  # the high bits are drawn too
    seeded = [round_key(random.Random(4)) for _ in range(2)]
    assert seeded[0] == seeded[1]  # a test's seeded generator repeats


def test_a_rounds_residual_is_rebuilt_from_its_key_alone_and_differs_from_its_images():
    shape = (2, 1, 1, 10)
    assert np.array_equal(residual(99, shape, 0.5), residual(99, shape, 0.5))
    assert not np.array_equal(residual(99, shape, 0.5), residual(100, shape, 0.5))
    assert np.abs(residual(99, shape, 0.5)).max() <= 0.5
