"""convert.keras.optim.plan on optimizers laid out by hand: state beside the slots (Nadam's running product,
which tf_keras keeps as the attribute ``_u_product`` and Keras 3 as its last variable) goes last or
the conversion is refused; tests/tf_fixtures/generate_keras_real.py (opt_nadam) checks the same
with the frameworks."""

from ckptool.ops.transform.convert.keras.optim import KerasOptimizer, TfOptimizer, plan


def _nadam(trailing=True):
    """iterations 1, learning rate 2, m/v of two variables 3..6, the product 7."""
    return TfOptimizer(it=1, lr=2, slots=[3, 4, 5, 6], kinds=["m", "v", "m", "v"], loss_scale=None, ignored=[],
                       every=list(range(1, 8 if trailing else 7)), per_variable=2,
                       trailing={"_u_product": 7} if trailing else {})


def _keras(n, label="nadam", config=None):
    return KerasOptimizer("optimizer", [f"optimizer/vars/{i}" for i in range(n)], label=label, config=config)


def _never(_):
    return False


def test_nadam_product_after_the_slots():
    built = plan(_nadam(), _keras(7), True, _never)
    assert not built.problems and built.pairs == [(t, f"optimizer/vars/{t - 1}") for t in range(1, 8)]
    unbuilt = plan(_nadam(), _keras(2), True, _never)  # laid out as Keras 3 will build it
    assert not unbuilt.problems and unbuilt.added[-1] == (7, "optimizer/vars/6") and len(unbuilt.added) == 5
    config = {"class_name": "Nadam", "config": {"name": "nadam"}}
    assert plan(_nadam(), _keras(2, "opt", config), True, _never).added[-1] == (7, "optimizer/vars/6")
    back = plan(_nadam(), _keras(7), False, _never)
    assert not back.problems and back.pairs[-1] == (7, "optimizer/vars/6")


def test_product_only_one_side_keeps_is_refused():
    adam = plan(_nadam(), _keras(6, "adam"), True, _never)  # an Adam template: Keras would skip the state
    assert adam.problems and "_u_product" in adam.problems[0] and not adam.pairs
    unknown = plan(_nadam(), _keras(7, "my_optimizer"), True, _never)  # nothing says where the product goes
    assert unknown.problems and not unknown.pairs
    no_product = plan(_nadam(trailing=False), _keras(7), True, _never)  # Keras keeps one the source has not
    assert no_product.problems and not no_product.pairs
    back_unbuilt = plan(_nadam(), _keras(2), False, _never)  # a fresh product is 1, not the zeros a slot gets
    assert back_unbuilt.problems and not back_unbuilt.zero_tf
