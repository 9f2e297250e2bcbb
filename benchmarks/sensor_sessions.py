"""Synthetic coding-agent hook transcripts for the sensor evaluation (not part of the package).

The sensors watch every tool call a coding agent makes (through the hooks of Claude Code and
Codex CLI) and report five kinds of trouble: the same command failing with the same error again
and again (``pain``), the same read-only call repeated with nothing changed in between
(``loop``), an edit of a file most of the code base imports (``reach``), tool output eating the
context window (``burn``) and a long turn nobody has looked at (``clock``). To measure how often
they fire on ordinary work, and how soon they fire on planted trouble, this module builds:

- ``repo_files()``: one small but realistic Python web service (``shopapi``, plus a TypeScript
  admin front end and a Rust pricing crate) that every session works in. Its imports are real,
  so a code graph can be built from it; the files imported by ten or more others are ``HUBS``.
- ``sessions()``: hook event sequences with the payload shapes the two CLIs send, half for each
  host. Nominal sessions are everyday tasks (fix a failing test, add an endpoint, rename, bump a
  dependency, investigate, document, refactor; prompts terse or long, some in Korean or
  Japanese) with the hiccups real work has: a test failing once or twice with different errors,
  a grep repeated with another pattern, one 20-40 KB test log, ``git status`` twice with edits
  between. Each planted session hides one problem inside the same kind of work and records
  ``expect_step``, the index of the tool event at which the problem first becomes true by the
  evaluation's definitions (see ``Session``).

Tool outputs are computed from a working copy of the repository: reads, greps, diffs and
``git status`` show the files as edited so far, and a failing test usually has a cause in the
working copy (the user's own uncommitted change, made without a tool event) that the agent's fix
undoes. Every random choice comes from ``random.Random`` seeded by the session's name, and every
session is checked against all five definitions when it is built (a draw that breaks one is
drawn again), so the output is the same on every run. ``python -m benchmarks.sensor_sessions``
prints a summary.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import random
import re
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

REPO = "{repo}"  # placeholder for the repository root; the eval runner substitutes a real path

# Files imported by ten or more other files, with their exact importer counts (checked by _importers).
HUBS = {"shopapi/core/config.py": 43, "shopapi/core/db.py": 17}

WINDOW_TOKENS = 200_000
CLOCK_CALLS = 50
KIND_COUNTS = {"nominal": 52, "pain": 32, "loop": 32, "reach": 32, "burn": 32, "clock": 32}
HOSTS = ("claude", "codex")


@dataclass
class Session:
    """One hook transcript.

    ``expect_step`` is the index into ``events`` of the tool event at which the planted problem
    first becomes true (None for nominal sessions):

    - pain: the third of five consecutive failures of one command with the same error (after
      hex ids, addresses, temp paths and numbers are masked);
    - loop: the third identical read-only call (same tool, input and output) with no edit between;
    - reach: the edit of a file in ``HUBS``;
    - burn: the first tool event i with ``used_i + 5 * mean(last five output tokens) >= 200,000``
      (tokens = characters / 4 of the tool output text and the prompts; see ``output_text``);
    - clock: the 50th tool event after one user prompt.
    """

    name: str
    host: str
    split: str
    kind: str
    events: list[tuple[str, dict[str, Any]]]
    expect_step: int | None


# ---------------------------------------------------------------- the repository

_CONFIG = '''"""Application settings, read once from the environment (variables prefixed SHOPAPI_)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache


def _env(name: str, default: str) -> str:
    return os.environ.get(f"SHOPAPI_{name}", default)


def _env_int(name: str, default: int) -> int:
    return int(_env(name, str(default)))


@dataclass(frozen=True)
class Settings:
    env: str = field(default_factory=lambda: _env("ENV", "development"))
    debug: bool = field(default_factory=lambda: _env("DEBUG", "0") == "1")
    database_url: str = field(
        default_factory=lambda: _env("DATABASE_URL", "postgresql+psycopg://shop:shop@localhost:5432/shop")
    )
    db_pool_size: int = field(default_factory=lambda: _env_int("DB_POOL_SIZE", 10))
    db_pool_timeout: int = field(default_factory=lambda: _env_int("DB_POOL_TIMEOUT", 30))
    secret_key: str = field(default_factory=lambda: _env("SECRET_KEY", "dev-secret-change-me"))
    token_ttl_seconds: int = field(default_factory=lambda: _env_int("TOKEN_TTL_SECONDS", 3600))
    currency: str = field(default_factory=lambda: _env("CURRENCY", "EUR"))
    tax_rate: Decimal = Decimal("0.19")
    free_shipping_over: Decimal = Decimal("50.00")
    flat_shipping: Decimal = Decimal("4.90")
    page_size: int = 20
    page_size_max: int = 100
    cart_ttl_hours: int = 48
    low_stock_threshold: int = 5
    timezone: str = field(default_factory=lambda: _env("TIMEZONE", "Europe/Berlin"))
    smtp_host: str = field(default_factory=lambda: _env("SMTP_HOST", "localhost"))
    smtp_port: int = field(default_factory=lambda: _env_int("SMTP_PORT", 1025))
    email_from: str = field(default_factory=lambda: _env("EMAIL_FROM", "orders@shop.example"))
    payment_provider: str = field(default_factory=lambda: _env("PAYMENT_PROVIDER", "stripe"))
    stripe_api_key: str = field(default_factory=lambda: _env("STRIPE_API_KEY", ""))
    log_level: str = field(default_factory=lambda: _env("LOG_LEVEL", "INFO"))

    @property
    def is_production(self) -> bool:
        return self.env == "production"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


settings = get_settings()
'''

_DB_MODULE = '''"""Database engine, sessions and the declarative base every model derives from."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

from shopapi.core.config import settings

engine = create_engine(
    settings.database_url,
    pool_size=settings.db_pool_size,
    pool_timeout=settings.db_pool_timeout,
    pool_pre_ping=True,
    echo=settings.debug,
)
SessionLocal = sessionmaker(bind=engine, autoflush=False, expire_on_commit=False)


class Base(DeclarativeBase):
    pass


@contextmanager
def session_scope() -> Iterator[Session]:
    """A session that commits on success and rolls back on any error."""
    session = SessionLocal()
    try:
        yield session
        session.commit()
    except Exception:
        session.rollback()
        raise
    finally:
        session.close()


def ping() -> bool:
    with engine.connect() as connection:
        return connection.execute(text("select 1")).scalar() == 1
'''

_SECURITY = '''"""Password hashing and signed access tokens."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time

from shopapi.core.config import settings

_ITERATIONS = 210_000


def hash_password(password: str) -> str:
    salt = secrets.token_hex(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), _ITERATIONS)
    return f"pbkdf2${_ITERATIONS}${salt}${digest.hex()}"


def verify_password(password: str, stored: str) -> bool:
    try:
        _, iterations, salt, expected = stored.split("$")
    except ValueError:
        return False
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), int(iterations))
    return hmac.compare_digest(digest.hex(), expected)


def create_access_token(user_id: int, *, ttl: int | None = None) -> str:
    payload = {"sub": user_id, "exp": int(time.time()) + (ttl or settings.token_ttl_seconds)}
    body = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")
    signature = hmac.new(settings.secret_key.encode(), body.encode(), hashlib.sha256).hexdigest()
    return f"{body}.{signature}"


def decode_access_token(token: str) -> int | None:
    body, _, signature = token.partition(".")
    expected = hmac.new(settings.secret_key.encode(), body.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(signature, expected):
        return None
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    if payload["exp"] < time.time():
        return None
    return int(payload["sub"])
'''

_ERRORS = '''"""Domain errors; shopapi.main turns them into JSON responses."""

from __future__ import annotations


class ShopError(Exception):
    status_code = 400
    code = "bad_request"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFoundError(ShopError):
    status_code = 404
    code = "not_found"


class ConflictError(ShopError):
    status_code = 409
    code = "conflict"


class PaymentError(ShopError):
    status_code = 402
    code = "payment_failed"

'''

_LOGSETUP = '''"""Logging configuration shared by the API and the workers."""

from __future__ import annotations

import logging.config

from shopapi.core.config import settings

_FORMAT = "%(asctime)s %(levelname)s [%(name)s] %(message)s"


def configure_logging() -> None:
    logging.config.dictConfig(
        {
            "version": 1,
            "disable_existing_loggers": False,
            "formatters": {"plain": {"format": _FORMAT}},
            "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
            "root": {"handlers": ["console"], "level": settings.log_level},
            "loggers": {"sqlalchemy.engine": {"level": "INFO" if settings.debug else "WARNING"}},
        }
    )
'''

_MAIN = '''"""The FastAPI application: ``uvicorn shopapi.main:app``."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from shopapi import __version__
from shopapi.api.router import api_router
from shopapi.core.config import settings
from shopapi.core.db import engine
from shopapi.core.errors import ShopError
from shopapi.core.logsetup import configure_logging


def create_app() -> FastAPI:
    configure_logging()
    app = FastAPI(title="shopapi", version=__version__, debug=settings.debug)
    app.include_router(api_router, prefix="/api/v1")

    @app.exception_handler(ShopError)
    async def shop_error(_: Request, exc: ShopError) -> JSONResponse:
        return JSONResponse({"error": exc.code, "detail": exc.message}, status_code=exc.status_code)

    @app.on_event("shutdown")
    def dispose_engine() -> None:
        engine.dispose()

    return app


app = create_app()
'''

_CLI = '''"""Admin command line: ``python -m shopapi.cli create-admin you@example.com``."""

from __future__ import annotations

import argparse
import getpass
import sys

from shopapi.core.config import settings
from shopapi.core.db import session_scope
from shopapi.schemas.user import UserCreate
from shopapi.services.users import create_user


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="shopapi")
    sub = parser.add_subparsers(dest="command", required=True)
    admin = sub.add_parser("create-admin", help="create a staff account")
    admin.add_argument("email")
    sub.add_parser("show-config", help="print the effective settings")
    args = parser.parse_args(argv)
    if args.command == "show-config":
        for name, value in sorted(vars(settings).items()):
            shown = "***" if "key" in name or "secret" in name else value
            print(f"{name} = {shown}")
        return 0
    password = getpass.getpass("password: ")
    with session_scope() as session:
        user = create_user(session, UserCreate(email=args.email, full_name="Admin", password=password))
        user.is_admin = True
    print(f"created admin {args.email}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

_MODEL_USER = '''"""Registered customers and staff."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from shopapi.core.db import Base


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(255), unique=True, index=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    full_name: Mapped[str] = mapped_column(String(120), default="")
    is_active: Mapped[bool] = mapped_column(default=True)
    is_admin: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(default=datetime.utcnow)

    def __repr__(self) -> str:
        return f"<User {self.id} {self.email}>"
'''

_MODEL_PRODUCT = '''"""Catalog products and their stock levels."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy import Numeric, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from shopapi.core.config import settings
from shopapi.core.db import Base


class Product(Base):
    __tablename__ = "products"

    id: Mapped[int] = mapped_column(primary_key=True)
    sku: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    slug: Mapped[str] = mapped_column(String(220), unique=True, index=True)
    description: Mapped[str] = mapped_column(Text, default="")
    price: Mapped[Decimal] = mapped_column(Numeric(10, 2))
    currency: Mapped[str] = mapped_column(String(3), default=settings.currency)
    stock: Mapped[int] = mapped_column(default=0)
    reserved: Mapped[int] = mapped_column(default=0)
    is_active: Mapped[bool] = mapped_column(default=True)
    created_at: Mapped[datetime] = mapped_column(default=datetime.utcnow)

    @property
    def available(self) -> int:
        return max(self.stock - self.reserved, 0)

    def __repr__(self) -> str:
        return f"<Product {self.sku} {self.price} {self.currency}>"
'''

_MODEL_ORDER = '''"""Orders and their lines. Money columns are stored with two decimals."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy import ForeignKey, Numeric, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from shopapi.core.config import settings
from shopapi.core.db import Base

STATUSES = ("pending", "paid", "shipped", "cancelled", "refunded")


class Order(Base):
    __tablename__ = "orders"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    status: Mapped[str] = mapped_column(String(20), default="pending")
    subtotal: Mapped[Decimal] = mapped_column(Numeric(10, 2), default=Decimal("0.00"))
    discount: Mapped[Decimal] = mapped_column(Numeric(10, 2), default=Decimal("0.00"))
    shipping: Mapped[Decimal] = mapped_column(Numeric(10, 2), default=Decimal("0.00"))
    tax: Mapped[Decimal] = mapped_column(Numeric(10, 2), default=Decimal("0.00"))
    total: Mapped[Decimal] = mapped_column(Numeric(10, 2), default=Decimal("0.00"))
    currency: Mapped[str] = mapped_column(String(3), default=settings.currency)
    coupon_code: Mapped[str | None] = mapped_column(String(32), default=None)
    created_at: Mapped[datetime] = mapped_column(default=datetime.utcnow)
    paid_at: Mapped[datetime | None] = mapped_column(default=None)

    lines: Mapped[list[OrderLine]] = relationship(back_populates="order", cascade="all, delete-orphan")

    def __repr__(self) -> str:
        return f"<Order {self.id} {self.status}>"


class OrderLine(Base):
    __tablename__ = "order_lines"

    id: Mapped[int] = mapped_column(primary_key=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), index=True)
    product_id: Mapped[int] = mapped_column(ForeignKey("products.id"))
    quantity: Mapped[int] = mapped_column(default=1)
    unit_price: Mapped[Decimal] = mapped_column(Numeric(10, 2))

    order: Mapped[Order] = relationship(back_populates="lines")

    @property
    def line_total(self) -> Decimal:
        return self.unit_price * self.quantity
'''

_MODEL_CART = '''"""Shopping carts. A cart expires after settings.cart_ttl_hours without changes."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey
from sqlalchemy.orm import Mapped, mapped_column, relationship

from shopapi.core.db import Base


class Cart(Base):
    __tablename__ = "carts"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), unique=True)
    updated_at: Mapped[datetime] = mapped_column(default=datetime.utcnow, onupdate=datetime.utcnow)

    items: Mapped[list[CartItem]] = relationship(back_populates="cart", cascade="all, delete-orphan")


class CartItem(Base):
    __tablename__ = "cart_items"

    id: Mapped[int] = mapped_column(primary_key=True)
    cart_id: Mapped[int] = mapped_column(ForeignKey("carts.id"), index=True)
    product_id: Mapped[int] = mapped_column(ForeignKey("products.id"))
    quantity: Mapped[int] = mapped_column(default=1)

    cart: Mapped[Cart] = relationship(back_populates="items")
'''

_MODEL_PAYMENT = '''"""Payments captured through the provider named in settings.payment_provider."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy import ForeignKey, Numeric, String
from sqlalchemy.orm import Mapped, mapped_column

from shopapi.core.config import settings
from shopapi.core.db import Base


class Payment(Base):
    __tablename__ = "payments"

    id: Mapped[int] = mapped_column(primary_key=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), index=True)
    provider: Mapped[str] = mapped_column(String(20), default=settings.payment_provider)
    provider_ref: Mapped[str] = mapped_column(String(64), default="")
    amount: Mapped[Decimal] = mapped_column(Numeric(10, 2))
    status: Mapped[str] = mapped_column(String(20), default="authorized")
    created_at: Mapped[datetime] = mapped_column(default=datetime.utcnow)
'''

_MODEL_REVIEW = '''"""Product reviews (1 to 5 stars)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Text
from sqlalchemy.orm import Mapped, mapped_column

from shopapi.core.db import Base


class Review(Base):
    __tablename__ = "reviews"
    __table_args__ = (CheckConstraint("rating between 1 and 5", name="rating_range"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    product_id: Mapped[int] = mapped_column(ForeignKey("products.id"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    rating: Mapped[int]
    body: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=datetime.utcnow)
'''

_MODEL_COUPON = '''"""Discount coupons: a percentage or a fixed amount, optionally time-limited."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy import Numeric, String
from sqlalchemy.orm import Mapped, mapped_column

from shopapi.core.db import Base


class Coupon(Base):
    __tablename__ = "coupons"

    id: Mapped[int] = mapped_column(primary_key=True)
    code: Mapped[str] = mapped_column(String(32), unique=True)
    percent: Mapped[int | None] = mapped_column(default=None)
    amount_off: Mapped[Decimal | None] = mapped_column(Numeric(10, 2), default=None)
    valid_until: Mapped[datetime | None] = mapped_column(default=None)
    max_uses: Mapped[int | None] = mapped_column(default=None)
    used_count: Mapped[int] = mapped_column(default=0)
'''

_SCHEMA_USER = '''"""Request and response bodies for users and login."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, EmailStr, Field


class UserCreate(BaseModel):
    email: EmailStr
    full_name: str = Field(default="", max_length=120)
    password: str = Field(min_length=10)


class UserOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    email: EmailStr
    full_name: str
    is_admin: bool
    created_at: datetime


class LoginIn(BaseModel):
    email: EmailStr
    password: str


class TokenOut(BaseModel):
    access_token: str
    token_type: str = "bearer"
'''

_SCHEMA_PRODUCT = '''"""Request and response bodies for the catalog."""

from __future__ import annotations

from decimal import Decimal

from pydantic import BaseModel, ConfigDict, Field


class ProductIn(BaseModel):
    sku: str = Field(min_length=1, max_length=64)
    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    price: Decimal = Field(gt=0, decimal_places=2)
    stock: int = Field(default=0, ge=0)


class ProductOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    sku: str
    name: str
    slug: str
    price: Decimal
    currency: str
    available: int


class PriceUpdate(BaseModel):
    price: Decimal = Field(gt=0, decimal_places=2)
'''

_SCHEMA_ORDER = '''"""Request and response bodies for carts and orders."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from pydantic import BaseModel, ConfigDict, Field


class CartItemIn(BaseModel):
    product_id: int
    quantity: int = Field(default=1, ge=1, le=99)


class CartOut(BaseModel):
    items: list[CartItemIn]
    subtotal: Decimal
    shipping: Decimal


class OrderCreate(BaseModel):
    coupon_code: str | None = None


class OrderLineOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    product_id: int
    quantity: int
    unit_price: Decimal


class OrderOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    status: str
    subtotal: Decimal
    discount: Decimal
    shipping: Decimal
    tax: Decimal
    total: Decimal
    currency: str
    created_at: datetime
    lines: list[OrderLineOut]
'''

_SCHEMA_PAYMENT = '''"""Request and response bodies for payments."""

from __future__ import annotations

from decimal import Decimal

from pydantic import BaseModel, ConfigDict


class PaymentIn(BaseModel):
    order_id: int
    token: str


class PaymentOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    order_id: int
    provider: str
    amount: Decimal
    status: str
'''

_SVC_USERS = '''"""Users: registration, lookup and authentication."""

from __future__ import annotations

import logging

from sqlalchemy import select
from sqlalchemy.orm import Session

from shopapi.core.config import settings
from shopapi.core.errors import ConflictError, NotFoundError
from shopapi.core.security import hash_password, verify_password
from shopapi.models.user import User
from shopapi.schemas.user import UserCreate

logger = logging.getLogger(__name__)


def get_user(session: Session, user_id: int) -> User:
    user = session.get(User, user_id)
    if user is None:
        raise NotFoundError(f"user {user_id} not found")
    return user


def get_user_by_email(session: Session, email: str) -> User | None:
    stmt = select(User).where(User.email == email.strip().lower())
    return session.scalars(stmt).first()


def create_user(session: Session, data: UserCreate) -> User:
    if get_user_by_email(session, data.email) is not None:
        raise ConflictError(f"email {data.email} is already registered")
    user = User(
        email=data.email.strip().lower(),
        full_name=data.full_name,
        password_hash=hash_password(data.password),
    )
    session.add(user)
    session.flush()
    logger.info("registered user %s", user.id)
    return user


def authenticate(session: Session, email: str, password: str) -> User | None:
    user = get_user_by_email(session, email)
    if user is None or not user.is_active:
        return None
    if not verify_password(password, user.password_hash):
        return None
    return user


def deactivate_user(session: Session, user_id: int) -> User:
    user = get_user(session, user_id)
    user.is_active = False
    if settings.is_production:
        logger.warning("deactivated user %s", user_id)
    return user
'''

_SVC_CATALOG = '''"""The catalog: products, prices and search."""

from __future__ import annotations

import logging
from decimal import Decimal

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from shopapi.core.config import settings
from shopapi.core.errors import ConflictError, NotFoundError
from shopapi.models.product import Product
from shopapi.schemas.product import ProductIn
from shopapi.utils.slugs import slugify

logger = logging.getLogger(__name__)


def get_product(session: Session, product_id: int) -> Product:
    product = session.get(Product, product_id)
    if product is None or not product.is_active:
        raise NotFoundError(f"product {product_id} not found")
    return product


def list_products(session: Session, *, offset: int = 0, limit: int | None = None) -> list[Product]:
    limit = min(limit or settings.page_size, settings.page_size_max)
    stmt = select(Product).where(Product.is_active).order_by(Product.id).offset(offset).limit(limit)
    return list(session.scalars(stmt))


def create_product(session: Session, data: ProductIn) -> Product:
    slug = slugify(data.name)
    if session.scalars(select(Product).where(Product.slug == slug)).first() is not None:
        raise ConflictError(f"a product called {data.name!r} already exists")
    product = Product(**data.model_dump(), slug=slug)
    session.add(product)
    session.flush()
    logger.info("created product %s (%s)", product.id, product.sku)
    return product


def update_price(session: Session, product_id: int, price: Decimal) -> Product:
    product = get_product(session, product_id)
    if price <= 0:
        raise ValueError("price must be positive")
    logger.info("price of %s: %s -> %s", product.sku, product.price, price)
    product.price = price
    return product


def search_products(session: Session, query: str, *, limit: int = 20) -> list[Product]:
    pattern = f"%{query.strip()}%"
    stmt = (
        select(Product)
        .where(Product.is_active, or_(Product.name.ilike(pattern), Product.sku.ilike(pattern)))
        .order_by(Product.name)
        .limit(min(limit, settings.page_size_max))
    )
    return list(session.scalars(stmt))
'''

_SVC_ORDERS = '''"""Orders: created from a cart, priced, paid and cancelled."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from decimal import Decimal

from sqlalchemy.orm import Session

from shopapi.core.config import settings
from shopapi.core.errors import ConflictError, NotFoundError
from shopapi.models.cart import Cart
from shopapi.models.order import Order, OrderLine
from shopapi.models.product import Product
from shopapi.services.coupons import discount_for, find_coupon
from shopapi.services.inventory import release_stock, reserve_stock
from shopapi.services.shipping import shipping_cost
from shopapi.utils.money import round_money

logger = logging.getLogger(__name__)


def get_order(session: Session, order_id: int) -> Order:
    order = session.get(Order, order_id)
    if order is None:
        raise NotFoundError(f"order {order_id} not found")
    return order


def order_total(order: Order) -> Decimal:
    taxable = order.subtotal - order.discount + order.shipping
    return round_money(taxable * (1 + settings.tax_rate))


def create_order(session: Session, cart: Cart, *, coupon_code: str | None = None) -> Order:
    if not cart.items:
        raise ConflictError("cannot order an empty cart")
    order = Order(user_id=cart.user_id, currency=settings.currency)
    for item in cart.items:
        product = session.get(Product, item.product_id)
        if product is None:
            raise NotFoundError(f"product {item.product_id} not found")
        reserve_stock(session, product, item.quantity)
        order.lines.append(OrderLine(product_id=product.id, quantity=item.quantity, unit_price=product.price))
    order.subtotal = sum((line.line_total for line in order.lines), Decimal("0.00"))
    if coupon_code:
        coupon = find_coupon(session, coupon_code)
        order.discount = discount_for(coupon, order.subtotal)
        order.coupon_code = coupon.code
    order.shipping = shipping_cost(order.subtotal - order.discount)
    order.total = order_total(order)
    order.tax = order.total - (order.subtotal - order.discount + order.shipping)
    session.add(order)
    session.flush()
    logger.info("order %s created for user %s: %s %s", order.id, order.user_id, order.total, order.currency)
    return order


def mark_paid(session: Session, order: Order) -> Order:
    if order.status != "pending":
        raise ConflictError(f"order {order.id} is {order.status}, not pending")
    order.status = "paid"
    order.paid_at = datetime.now(timezone.utc)
    return order


def cancel_order(session: Session, order_id: int) -> Order:
    order = get_order(session, order_id)
    if order.status in ("shipped", "cancelled"):
        raise ConflictError(f"order {order_id} cannot be cancelled ({order.status})")
    for line in order.lines:
        release_stock(session, line.product_id, line.quantity)
    order.status = "cancelled"
    return order
'''

_SVC_CARTS = '''"""Carts: one per user, priced on the fly."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from shopapi.core.config import settings
from shopapi.models.cart import Cart, CartItem
from shopapi.models.product import Product
from shopapi.services.catalog import get_product
from shopapi.services.shipping import shipping_cost
from shopapi.utils.money import round_money


def get_or_create_cart(session: Session, user_id: int) -> Cart:
    cart = session.scalars(select(Cart).where(Cart.user_id == user_id)).first()
    if cart is None:
        cart = Cart(user_id=user_id)
        session.add(cart)
        session.flush()
    return cart


def add_item(session: Session, cart: Cart, product_id: int, quantity: int = 1) -> CartItem:
    if quantity < 1:
        raise ValueError("quantity must be at least 1")
    get_product(session, product_id)  # raises NotFoundError for unknown and inactive products
    for item in cart.items:
        if item.product_id == product_id:
            item.quantity += quantity
            return item
    item = CartItem(product_id=product_id, quantity=quantity)
    cart.items.append(item)
    return item


def remove_item(session: Session, cart: Cart, product_id: int) -> None:
    cart.items = [item for item in cart.items if item.product_id != product_id]


def cart_subtotal(session: Session, cart: Cart) -> Decimal:
    total = Decimal("0.00")
    for item in cart.items:
        product = session.get(Product, item.product_id)
        if product is not None:
            total += product.price * item.quantity
    return round_money(total)


def cart_summary(session: Session, cart: Cart) -> dict[str, Decimal]:
    subtotal = cart_subtotal(session, cart)
    return {"subtotal": subtotal, "shipping": shipping_cost(subtotal)}


def expire_stale_carts(session: Session, now: datetime) -> int:
    cutoff = now - timedelta(hours=settings.cart_ttl_hours)
    result = session.execute(delete(Cart).where(Cart.updated_at < cutoff))
    return result.rowcount or 0
'''

_SVC_PAYMENTS = '''"""Payments through the configured provider (Stripe in production, a fake in tests)."""

from __future__ import annotations

import logging
from decimal import Decimal

import httpx
from sqlalchemy.orm import Session

from shopapi.core.config import settings
from shopapi.core.errors import ConflictError, PaymentError
from shopapi.models.order import Order
from shopapi.models.payment import Payment
from shopapi.utils.money import to_cents

logger = logging.getLogger(__name__)

_STRIPE_URL = "https://api.stripe.com/v1/payment_intents"


def _provider_client() -> httpx.Client:
    return httpx.Client(auth=(settings.stripe_api_key, ""), timeout=10.0)


def capture_payment(session: Session, order: Order, token: str) -> Payment:
    if order.status != "pending":
        raise ConflictError(f"order {order.id} is already {order.status}")
    if settings.payment_provider == "fake":
        reference = f"fake_{order.id}"
    else:
        with _provider_client() as client:
            data = {"amount": to_cents(order.total), "currency": order.currency.lower()}
            data["payment_method"] = token
            response = client.post(_STRIPE_URL, data={**data, "confirm": "true"})
        if response.status_code != 200:
            logger.warning("payment for order %s failed: %s", order.id, response.text[:200])
            raise PaymentError(f"payment declined ({response.status_code})")
        reference = response.json()["id"]
    payment = Payment(order_id=order.id, provider_ref=reference, amount=order.total, status="captured")
    session.add(payment)
    return payment


def refund_payment(session: Session, payment: Payment, amount: Decimal | None = None) -> Payment:
    amount = payment.amount if amount is None else amount
    if amount > payment.amount:
        raise ValueError("cannot refund more than was captured")
    payment.status = "refunded" if amount == payment.amount else "partially_refunded"
    logger.info("refunded %s of payment %s", amount, payment.id)
    return payment
'''

_SVC_REVIEWS = '''"""Product reviews and ratings."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from shopapi.core.config import settings
from shopapi.models.product import Product
from shopapi.models.review import Review


def add_review(session: Session, product: Product, user_id: int, rating: int, body: str = "") -> Review:
    if not 1 <= rating <= 5:
        raise ValueError("rating must be between 1 and 5")
    review = Review(product_id=product.id, user_id=user_id, rating=rating, body=body.strip())
    session.add(review)
    return review


def list_reviews(session: Session, product_id: int, *, offset: int = 0) -> list[Review]:
    stmt = (
        select(Review)
        .where(Review.product_id == product_id)
        .order_by(Review.created_at.desc())
        .offset(offset)
        .limit(settings.page_size)
    )
    return list(session.scalars(stmt))


def average_rating(session: Session, product_id: int) -> Decimal:
    count, total = session.execute(
        select(func.count(Review.id), func.sum(Review.rating)).where(Review.product_id == product_id)
    ).one()
    return (Decimal(total) / count).quantize(Decimal("0.1"))
'''

_SVC_COUPONS = '''"""Coupons: lookup, validation and the discount they give."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import select
from sqlalchemy.orm import Session

from shopapi.core.config import settings
from shopapi.core.errors import ConflictError, NotFoundError
from shopapi.models.coupon import Coupon
from shopapi.utils.dates import utcnow
from shopapi.utils.money import round_money


def find_coupon(session: Session, code: str) -> Coupon:
    coupon = session.scalars(select(Coupon).where(Coupon.code == code.strip().upper())).first()
    if coupon is None:
        raise NotFoundError(f"coupon {code} not found")
    validate_coupon(coupon)
    return coupon


def validate_coupon(coupon: Coupon) -> None:
    if coupon.valid_until is not None and coupon.valid_until < utcnow():
        raise ConflictError(f"coupon {coupon.code} has expired")
    if coupon.max_uses is not None and coupon.used_count >= coupon.max_uses:
        raise ConflictError(f"coupon {coupon.code} has been used up")


def discount_for(coupon: Coupon, subtotal: Decimal) -> Decimal:
    if coupon.percent is not None:
        discount = subtotal * Decimal(coupon.percent) / 100
    elif coupon.amount_off is not None:
        discount = coupon.amount_off
    else:
        discount = Decimal("0.00")
    discount = min(discount, subtotal)
    if settings.currency == "JPY":
        return discount.quantize(Decimal("1"))
    return round_money(discount)
'''

_SVC_INVENTORY = '''"""Stock reservations: reserved when an order is placed, released when it is cancelled."""

from __future__ import annotations

import logging

from sqlalchemy import select
from sqlalchemy.orm import Session

from shopapi.core.config import settings
from shopapi.models.product import Product

logger = logging.getLogger(__name__)


class OutOfStockError(Exception):
    """Fewer items are available than an order asks for."""


def reserve_stock(session: Session, product: Product, quantity: int) -> None:
    if product.available < quantity:
        raise OutOfStockError(f"only {product.available} of {product.sku} left")
    product.reserved += quantity
    if product.available <= settings.low_stock_threshold:
        logger.warning("low stock for %s: %s left", product.sku, product.available)


def release_stock(session: Session, product_id: int, quantity: int) -> None:
    product = session.get(Product, product_id)
    if product is None:
        logger.error("cannot release stock of missing product %s", product_id)
        return
    product.reserved = max(product.reserved - quantity, 0)


def low_stock_products(session: Session) -> list[Product]:
    low = Product.stock - Product.reserved <= settings.low_stock_threshold
    stmt = select(Product).where(Product.is_active, low)
    return list(session.scalars(stmt))
'''

_SVC_EMAILS = '''"""Transactional e-mail, sent by the email worker."""

from __future__ import annotations

import smtplib
from email.message import EmailMessage

from shopapi.core.config import settings
from shopapi.models.order import Order
from shopapi.models.user import User
from shopapi.utils.money import format_price

_TEMPLATES = {
    "order_confirmation": "Hi {name},\\n\\nthanks for your order #{order_id} ({total}).\\n",
    "password_reset": "Hi {name},\\n\\nuse this link to reset your password: {link}\\n",
}


def render_template(name: str, **values: object) -> str:
    return _TEMPLATES[name].format(**values)


def _send(to: str, subject: str, body: str) -> None:
    message = EmailMessage()
    message["From"] = settings.email_from
    message["To"] = to
    message["Subject"] = subject
    message.set_content(body)
    with smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=10) as smtp:
        smtp.send_message(message)


def send_order_confirmation(user: User, order: Order) -> None:
    total = format_price(order.total, order.currency)
    name = user.full_name or user.email
    body = render_template("order_confirmation", name=name, order_id=order.id, total=total)
    _send(user.email, f"Your order #{order.id}", body)


def send_password_reset(user: User, link: str) -> None:
    body = render_template("password_reset", name=user.full_name or user.email, link=link)
    _send(user.email, "Reset your password", body)
'''

_SVC_SHIPPING = '''"""Shipping costs and delivery estimates."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from shopapi.core.config import settings
from shopapi.utils.money import round_money

_EXPRESS_SURCHARGE = Decimal("7.50")


def shipping_cost(subtotal: Decimal, *, express: bool = False) -> Decimal:
    if subtotal >= settings.free_shipping_over and not express:
        return Decimal("0.00")
    cost = settings.flat_shipping
    if express:
        cost += _EXPRESS_SURCHARGE
    return round_money(cost)


def estimate_delivery(ordered_on: date, *, express: bool = False) -> date:
    from shopapi.utils.dates import add_business_days

    return add_business_days(ordered_on, 1 if express else 3)
'''

_UTIL_MONEY = '''"""Money helpers. Amounts are Decimals with two places; the provider API wants integer cents."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from shopapi.core.config import settings

_CENT = Decimal("0.01")
_SYMBOLS = {"EUR": "€", "USD": "$", "GBP": "£", "JPY": "¥"}


def round_money(amount: Decimal) -> Decimal:
    return amount.quantize(_CENT, rounding=ROUND_HALF_UP)


def to_cents(amount: Decimal) -> int:
    return int(round_money(amount) * 100)


def from_cents(cents: int) -> Decimal:
    return (Decimal(cents) / 100).quantize(_CENT)


def format_price(amount: Decimal, currency: str | None = None) -> str:
    currency = currency or settings.currency
    symbol = _SYMBOLS.get(currency, currency + " ")
    if currency == "JPY":
        return f"{symbol}{amount:,.0f}"
    return f"{symbol}{round_money(amount):,.2f}"
'''

_UTIL_DATES = '''"""Date helpers. Everything is stored in UTC and shown in settings.timezone."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from shopapi.core.config import settings


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def to_local(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(ZoneInfo(settings.timezone))


def add_business_days(start: date, days: int) -> date:
    current = start
    while days > 0:
        current += timedelta(days=1)
        if current.weekday() < 5:
            days -= 1
    return current
'''

_UTIL_PAGINATION = '''"""Offset pagination and Link headers."""

from __future__ import annotations

from urllib.parse import urlencode

from shopapi.core.config import settings


def clamp_limit(limit: int | None) -> int:
    if limit is None or limit < 1:
        return settings.page_size
    return min(limit, settings.page_size_max)


def page_links(base_url: str, offset: int, limit: int, total: int) -> dict[str, str]:
    links: dict[str, str] = {}
    if offset + limit < total:
        links["next"] = f"{base_url}?{urlencode({'offset': offset + limit, 'limit': limit})}"
    if offset > 0:
        links["prev"] = f"{base_url}?{urlencode({'offset': max(offset - limit, 0), 'limit': limit})}"
    return links
'''

_UTIL_SLUGS = '''"""URL slugs for product names."""

from __future__ import annotations

import re
import unicodedata

_NON_WORD = re.compile(r"[^a-z0-9]+")


def slugify(text: str, *, max_length: int = 200) -> str:
    normalized = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = _NON_WORD.sub("-", normalized.lower()).strip("-")
    return slug[:max_length].rstrip("-") or "item"
'''

_API_DEPS = '''"""FastAPI dependencies shared by the routes."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import Depends, Header, HTTPException, status
from sqlalchemy.orm import Session

from shopapi.core.config import settings
from shopapi.core.db import SessionLocal
from shopapi.core.security import decode_access_token
from shopapi.models.user import User
from shopapi.services.users import get_user


def get_db() -> Iterator[Session]:
    session = SessionLocal()
    try:
        yield session
        session.commit()
    except Exception:
        session.rollback()
        raise
    finally:
        session.close()


def current_user(authorization: str = Header(default=""), db: Session = Depends(get_db)) -> User:
    scheme, _, token = authorization.partition(" ")
    user_id = decode_access_token(token) if scheme.lower() == "bearer" else None
    if user_id is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid or expired token")
    user = get_user(db, user_id)
    if not user.is_active:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "account disabled")
    return user


def admin_user(user: User = Depends(current_user)) -> User:
    if not user.is_admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "admin only")
    return user


def page_params(offset: int = 0, limit: int = settings.page_size) -> tuple[int, int]:
    return max(offset, 0), min(max(limit, 1), settings.page_size_max)
'''

_API_ROUTER = '''"""All routes, mounted by shopapi.main under /api/v1."""

from __future__ import annotations

from fastapi import APIRouter

from shopapi.api.routes.carts import router as carts_router
from shopapi.api.routes.health import router as health_router
from shopapi.api.routes.orders import router as orders_router
from shopapi.api.routes.payments import router as payments_router
from shopapi.api.routes.products import router as products_router
from shopapi.api.routes.users import router as users_router

api_router = APIRouter()
for router in (health_router, users_router, products_router, carts_router, orders_router, payments_router):
    api_router.include_router(router)
'''

_ROUTE_USERS = '''"""Registration, login and the current user."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, status
from sqlalchemy.orm import Session

from shopapi.api.deps import current_user, get_db
from shopapi.core.config import settings
from shopapi.core.security import create_access_token
from shopapi.models.user import User
from shopapi.schemas.user import LoginIn, TokenOut, UserCreate, UserOut
from shopapi.services.users import authenticate, create_user

router = APIRouter(prefix="/users", tags=["users"])


@router.post("", response_model=UserOut, status_code=status.HTTP_201_CREATED)
def register(data: UserCreate, db: Session = Depends(get_db)) -> User:
    return create_user(db, data)


@router.post("/login", response_model=TokenOut)
def login(data: LoginIn, db: Session = Depends(get_db)) -> TokenOut:
    user = authenticate(db, data.email, data.password)
    if user is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "wrong e-mail or password")
    return TokenOut(access_token=create_access_token(user.id, ttl=settings.token_ttl_seconds))


@router.get("/me", response_model=UserOut)
def me(user: User = Depends(current_user)) -> User:
    return user
'''

_ROUTE_PRODUCTS = '''"""Catalog endpoints. Writes need an admin token."""

from __future__ import annotations

from fastapi import APIRouter, Depends, status
from sqlalchemy.orm import Session

from shopapi.api.deps import admin_user, get_db, page_params
from shopapi.core.config import settings
from shopapi.schemas.product import PriceUpdate, ProductIn, ProductOut
from shopapi.services.catalog import create_product, get_product, list_products, search_products, update_price

router = APIRouter(prefix="/products", tags=["products"])


@router.get("", response_model=list[ProductOut])
def index(page: tuple[int, int] = Depends(page_params), db: Session = Depends(get_db)) -> list[ProductOut]:
    offset, limit = page
    return [ProductOut.model_validate(p) for p in list_products(db, offset=offset, limit=limit)]


@router.get("/search", response_model=list[ProductOut])
def search(q: str, limit: int = settings.page_size, db: Session = Depends(get_db)) -> list[ProductOut]:
    if len(q.strip()) < 2:
        return []
    return [ProductOut.model_validate(p) for p in search_products(db, q, limit=limit)]


@router.get("/{product_id}", response_model=ProductOut)
def show(product_id: int, db: Session = Depends(get_db)) -> ProductOut:
    return ProductOut.model_validate(get_product(db, product_id))


@router.post(
    "", response_model=ProductOut, status_code=status.HTTP_201_CREATED, dependencies=[Depends(admin_user)]
)
def create(data: ProductIn, db: Session = Depends(get_db)) -> ProductOut:
    return ProductOut.model_validate(create_product(db, data))


@router.put("/{product_id}/price", response_model=ProductOut, dependencies=[Depends(admin_user)])
def set_price(product_id: int, data: PriceUpdate, db: Session = Depends(get_db)) -> ProductOut:
    return ProductOut.model_validate(update_price(db, product_id, data.price))
'''

_ROUTE_CARTS = '''"""The current user's cart."""

from __future__ import annotations

from fastapi import APIRouter, Depends, status
from sqlalchemy.orm import Session

from shopapi.api.deps import current_user, get_db
from shopapi.core.config import settings
from shopapi.models.user import User
from shopapi.schemas.order import CartItemIn, CartOut
from shopapi.services.carts import add_item, cart_summary, get_or_create_cart, remove_item

router = APIRouter(prefix="/cart", tags=["cart"])


def _out(db: Session, user: User) -> CartOut:
    cart = get_or_create_cart(db, user.id)
    summary = cart_summary(db, cart)
    items = [CartItemIn(product_id=i.product_id, quantity=i.quantity) for i in cart.items]
    return CartOut(items=items, subtotal=summary["subtotal"], shipping=summary["shipping"])


@router.get("", response_model=CartOut)
def show(db: Session = Depends(get_db), user: User = Depends(current_user)) -> CartOut:
    return _out(db, user)


@router.post("/items", response_model=CartOut, status_code=status.HTTP_201_CREATED)
def add(data: CartItemIn, db: Session = Depends(get_db), user: User = Depends(current_user)) -> CartOut:
    if data.quantity > settings.page_size_max:
        data.quantity = settings.page_size_max
    add_item(db, get_or_create_cart(db, user.id), data.product_id, data.quantity)
    return _out(db, user)


@router.delete("/items/{product_id}", response_model=CartOut)
def remove(product_id: int, db: Session = Depends(get_db), user: User = Depends(current_user)) -> CartOut:
    remove_item(db, get_or_create_cart(db, user.id), product_id)
    return _out(db, user)
'''

_ROUTE_ORDERS = '''"""Placing, listing and cancelling orders."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, status
from sqlalchemy import select
from sqlalchemy.orm import Session

from shopapi.api.deps import current_user, get_db, page_params
from shopapi.core.config import settings
from shopapi.models.order import Order
from shopapi.models.user import User
from shopapi.schemas.order import OrderCreate, OrderOut
from shopapi.services.carts import get_or_create_cart
from shopapi.services.orders import cancel_order, create_order, get_order

router = APIRouter(prefix="/orders", tags=["orders"])


@router.post("", response_model=OrderOut, status_code=status.HTTP_201_CREATED)
def place(data: OrderCreate, db: Session = Depends(get_db), user: User = Depends(current_user)) -> Order:
    cart = get_or_create_cart(db, user.id)
    order = create_order(db, cart, coupon_code=data.coupon_code)
    cart.items.clear()
    return order


@router.get("", response_model=list[OrderOut])
def index(
    page: tuple[int, int] = Depends(page_params),
    db: Session = Depends(get_db),
    user: User = Depends(current_user),
) -> list[Order]:
    offset, limit = page
    stmt = select(Order).where(Order.user_id == user.id).order_by(Order.id.desc()).offset(offset).limit(limit)
    return list(db.scalars(stmt))


@router.get("/{order_id}", response_model=OrderOut)
def show(order_id: int, db: Session = Depends(get_db), user: User = Depends(current_user)) -> Order:
    order = get_order(db, order_id)
    if order.user_id != user.id and not user.is_admin:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"order {order_id} not found")
    return order


@router.post("/{order_id}/cancel", response_model=OrderOut)
def cancel(order_id: int, db: Session = Depends(get_db), user: User = Depends(current_user)) -> Order:
    order = show(order_id, db, user)
    if settings.is_production and order.status == "paid":
        raise HTTPException(status.HTTP_409_CONFLICT, "paid orders are cancelled by support")
    return cancel_order(db, order.id)
'''

_ROUTE_PAYMENTS = '''"""Paying for an order."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, status
from sqlalchemy.orm import Session

from shopapi.api.deps import current_user, get_db
from shopapi.core.config import settings
from shopapi.models.user import User
from shopapi.schemas.payment import PaymentIn, PaymentOut
from shopapi.services.orders import get_order, mark_paid
from shopapi.services.payments import capture_payment

router = APIRouter(prefix="/payments", tags=["payments"])


@router.post("", response_model=PaymentOut, status_code=status.HTTP_201_CREATED)
def pay(data: PaymentIn, db: Session = Depends(get_db), user: User = Depends(current_user)) -> PaymentOut:
    order = get_order(db, data.order_id)
    if order.user_id != user.id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"order {data.order_id} not found")
    if not settings.stripe_api_key and settings.payment_provider == "stripe":
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "payments are not configured")
    payment = capture_payment(db, order, data.token)
    mark_paid(db, order)
    return PaymentOut.model_validate(payment)
'''

_ROUTE_HEALTH = '''"""Liveness and readiness probes."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from shopapi import __version__
from shopapi.core.config import settings
from shopapi.core.db import ping

router = APIRouter(tags=["health"])


@router.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok", "version": __version__, "env": settings.env}


@router.get("/ready")
def ready(response: Response) -> dict[str, str]:
    try:
        ping()
    except Exception as exc:  # noqa: BLE001 - any database error means not ready
        response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
        return {"status": "unavailable", "error": type(exc).__name__}
    return {"status": "ready"}
'''

_WORKER_EMAIL = '''"""Sends order confirmations for paid orders that have not been mailed yet."""

from __future__ import annotations

import logging
import time

from sqlalchemy import select

from shopapi.core.config import settings
from shopapi.core.db import session_scope
from shopapi.models.order import Order
from shopapi.models.user import User
from shopapi.services.emails import send_order_confirmation

logger = logging.getLogger(__name__)

POLL_SECONDS = 15


def run_once() -> int:
    sent = 0
    with session_scope() as session:
        stmt = select(Order).where(Order.status == "paid", Order.paid_at.is_not(None)).limit(50)
        for order in session.scalars(stmt):
            user = session.get(User, order.user_id)
            if user is None:
                continue
            send_order_confirmation(user, order)
            sent += 1
    return sent


def main() -> None:
    logger.info("email worker started (smtp %s:%s)", settings.smtp_host, settings.smtp_port)
    while True:
        try:
            sent = run_once()
        except Exception:
            logger.exception("email batch failed")
            sent = 0
        if not sent:
            time.sleep(POLL_SECONDS)
'''

_WORKER_CLEANUP = '''"""Nightly cleanup: expire stale carts."""

from __future__ import annotations

import logging

from shopapi.core.config import settings
from shopapi.core.db import session_scope
from shopapi.services.carts import expire_stale_carts
from shopapi.utils.dates import utcnow

logger = logging.getLogger(__name__)


def main() -> None:
    with session_scope() as session:
        removed = expire_stale_carts(session, utcnow())
    logger.info("removed %s carts older than %sh", removed, settings.cart_ttl_hours)


if __name__ == "__main__":
    main()
'''

_SCRIPT_SEED = '''"""Fill a development database with a few hundred products: ``python scripts/seed_data.py``."""

from __future__ import annotations

import random
from decimal import Decimal

from shopapi.core.config import settings
from shopapi.core.db import Base, engine, session_scope
from shopapi.schemas.product import ProductIn
from shopapi.services.catalog import create_product

ADJECTIVES = ["Classic", "Organic", "Compact", "Deluxe", "Vintage", "Smart", "Travel", "Bamboo"]
NOUNS = ["Mug", "Backpack", "Lamp", "Notebook", "Kettle", "Scarf", "Speaker", "Planter"]


def main(count: int = 300) -> None:
    if settings.is_production:
        raise SystemExit("refusing to seed a production database")
    Base.metadata.create_all(engine)
    rng = random.Random(7)
    with session_scope() as session:
        for i in range(count):
            name = f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} {i}"
            price = Decimal(rng.randrange(299, 19999)) / 100
            data = ProductIn(sku=f"SKU-{i:05d}", name=name, price=price, stock=rng.randrange(0, 80))
            create_product(session, data)
    print(f"seeded {count} products")


if __name__ == "__main__":
    main()
'''

_SCRIPT_EXPORT = '''"""Export orders as CSV for accounting: ``python scripts/export_orders.py --since 2024-11-01``."""

from __future__ import annotations

import argparse
import csv
import sys
from datetime import datetime

from sqlalchemy import select

from shopapi.core.config import settings
from shopapi.core.db import session_scope
from shopapi.models.order import Order
from shopapi.utils.money import format_price

COLUMNS = [
    "id",
    "created_at",
    "user_id",
    "status",
    "subtotal",
    "discount",
    "shipping",
    "tax",
    "total",
    "currency",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--since", type=datetime.fromisoformat, required=True)
    parser.add_argument("--pretty", action="store_true", help="format amounts for humans")
    args = parser.parse_args(argv)
    writer = csv.writer(sys.stdout)
    writer.writerow(COLUMNS)
    with session_scope() as session:
        stmt = select(Order).where(Order.created_at >= args.since).order_by(Order.id)
        for order in session.scalars(stmt):
            row = [getattr(order, column) for column in COLUMNS]
            if args.pretty:
                row[4:9] = [format_price(amount, order.currency) for amount in row[4:9]]
            writer.writerow(row)
    print(f"# exported in {settings.currency} ({settings.env})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

_MIGRATIONS_ENV = '''"""Alembic environment: migrations run against settings.database_url."""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

from shopapi.core.config import settings
from shopapi.core.db import Base

config = context.config
config.set_main_option("sqlalchemy.url", settings.database_url)
target_metadata = Base.metadata


def run_migrations_online() -> None:
    section = config.get_section(config.config_ini_section) or {}
    connectable = engine_from_config(section, poolclass=pool.NullPool)
    with connectable.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()


run_migrations_online()
'''

_CONFTEST = '''"""Fixtures: an in-memory SQLite database per run, a rolled-back session per test, an API client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session, sessionmaker

from shopapi.core.config import settings
from shopapi.core.db import Base


@pytest.fixture(scope="session")
def engine() -> Iterator[Engine]:
    assert not settings.is_production, "refusing to run tests against production settings"
    engine = create_engine("sqlite+pysqlite:///:memory:")
    Base.metadata.create_all(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def db_session(engine: Engine) -> Iterator[Session]:
    connection = engine.connect()
    transaction = connection.begin()
    session = sessionmaker(bind=connection, expire_on_commit=False)()
    yield session
    session.close()
    transaction.rollback()
    connection.close()


@pytest.fixture
def client(db_session: Session) -> Iterator[TestClient]:
    from shopapi.api.deps import get_db
    from shopapi.main import app

    app.dependency_overrides[get_db] = lambda: db_session
    with TestClient(app) as test_client:
        yield test_client
    app.dependency_overrides.clear()
'''

_FACTORIES = '''"""Small builders for test data; every argument has a sensible default."""

from __future__ import annotations

import itertools
from datetime import datetime
from decimal import Decimal

from sqlalchemy.orm import Session

from shopapi.core.security import hash_password
from shopapi.models.cart import Cart, CartItem
from shopapi.models.coupon import Coupon
from shopapi.models.order import Order
from shopapi.models.product import Product
from shopapi.models.user import User

_ids = itertools.count(1)


def make_user(
    session: Session, *, email: str | None = None, password: str = "password-123", is_admin: bool = False
) -> User:
    email = email or f"user{next(_ids)}@example.com"
    user = User(email=email, password_hash=hash_password(password), is_admin=is_admin)
    session.add(user)
    session.flush()
    return user


def make_product(
    session: Session,
    *,
    sku: str | None = None,
    name: str | None = None,
    price: Decimal = Decimal("19.99"),
    stock: int = 10,
) -> Product:
    n = next(_ids)
    name = name or f"Product {n}"
    product = Product(sku=sku or f"SKU-{n:05d}", name=name, slug=f"product-{n}", price=price, stock=stock)
    session.add(product)
    session.flush()
    return product


def make_cart(
    session: Session, *, product: Product | None = None, price: Decimal | None = None, quantity: int = 1
) -> Cart:
    product = product or make_product(session, price=price or Decimal("19.99"))
    cart = Cart(user_id=make_user(session).id, items=[CartItem(product_id=product.id, quantity=quantity)])
    session.add(cart)
    session.flush()
    return cart


def make_order(session: Session, *, subtotal: Decimal = Decimal("50.00"), status: str = "pending") -> Order:
    order = Order(user_id=make_user(session).id, subtotal=subtotal, total=subtotal, status=status)
    session.add(order)
    session.flush()
    return order


def make_coupon(
    session: Session,
    *,
    code: str | None = None,
    percent: int | None = None,
    amount_off: Decimal | None = None,
    valid_until: datetime | None = None,
    max_uses: int | None = None,
) -> Coupon:
    coupon = Coupon(
        code=code or f"CODE{next(_ids)}",
        percent=percent,
        amount_off=amount_off,
        valid_until=valid_until,
        max_uses=max_uses,
    )
    session.add(coupon)
    session.flush()
    return coupon
'''

_DB_PARAM = "db_session: Session"
_FAKE_PROVIDER = (
    'monkeypatch.setattr("shopapi.services.payments.settings", replace(settings, payment_provider="fake"))\n'
)
_IMP_SESSION = "from sqlalchemy.orm import Session\n"

# test file -> (import block, parameters of every test, [(test name, body)])
_TEST_SPECS: dict[str, tuple[str, str, list[tuple[str, str]]]] = {
    "tests/test_users.py": (
        _IMP_SESSION + "\n"
        "from shopapi.core.security import hash_password\nfrom shopapi.schemas.user import UserCreate\n"
        "from shopapi.services.users import authenticate, create_user, deactivate_user, get_user_by_email\n"
        "from tests.factories import make_user\n",
        _DB_PARAM,
        [
            (
                "test_create_user_lowercases_email",
                'data = UserCreate(email="Ann@Example.com", password="correct horse battery")\n'
                'assert create_user(db_session, data).email == "ann@example.com"',
            ),
            (
                "test_get_user_by_email_ignores_case",
                'make_user(db_session, email="bob@example.com")\n'
                'assert get_user_by_email(db_session, " Bob@Example.com ") is not None',
            ),
            (
                "test_authenticate_with_right_password",
                'make_user(db_session, email="cy@example.com", password="s3cret-password")\n'
                'assert authenticate(db_session, "cy@example.com", "s3cret-password") is not None',
            ),
            (
                "test_authenticate_with_wrong_password",
                'make_user(db_session, email="di@example.com", password="s3cret-password")\n'
                'assert authenticate(db_session, "di@example.com", "nope") is None',
            ),
            (
                "test_deactivate_user_sets_flag",
                "user = make_user(db_session)\nassert deactivate_user(db_session, user.id).is_active is False",
            ),
            ("test_password_hash_is_salted", 'assert hash_password("same") != hash_password("same")'),
        ],
    ),
    "tests/test_catalog.py": (
        "from decimal import Decimal\n\nimport pytest\n" + _IMP_SESSION + "\n"
        "from shopapi.core.errors import ConflictError, NotFoundError\nfrom shopapi.schemas.product import ProductIn\n"
        "from shopapi.services.catalog import (\n    create_product,\n    get_product,\n    list_products,\n"
        "    search_products,\n    update_price,\n)\n"
        "from tests.factories import make_product\n",
        _DB_PARAM,
        [
            (
                "test_create_product_builds_slug",
                'data = ProductIn(sku="MUG-1", name="Blue Mug", price=Decimal("9.90"))\n'
                'assert create_product(db_session, data).slug == "blue-mug"',
            ),
            (
                "test_create_product_rejects_duplicate_name",
                'create_product(db_session, ProductIn(sku="A-1", name="Lamp", price=Decimal("5.00")))\n'
                "with pytest.raises(ConflictError):\n"
                '    create_product(db_session, ProductIn(sku="A-2", name="Lamp", price=Decimal("6.00")))',
            ),
            (
                "test_get_product_hides_inactive",
                "product = make_product(db_session)\nproduct.is_active = False\nwith pytest.raises(NotFoundError):\n"
                "    get_product(db_session, product.id)",
            ),
            (
                "test_list_products_respects_limit",
                'for i in range(5):\n    make_product(db_session, sku=f"LIM-{i}")\n'
                "assert len(list_products(db_session, limit=3)) == 3",
            ),
            (
                "test_update_price_rejects_zero",
                "product = make_product(db_session)\nwith pytest.raises(ValueError):\n"
                '    update_price(db_session, product.id, Decimal("0"))',
            ),
            (
                "test_search_products_matches_sku",
                'make_product(db_session, sku="LAMP-42", name="Desk lamp")\n'
                'assert [p.sku for p in search_products(db_session, "lamp-4")] == ["LAMP-42"]',
            ),
        ],
    ),
    "tests/test_orders.py": (
        "from decimal import Decimal\n\nimport pytest\n" + _IMP_SESSION + "\n"
        "from shopapi.core.config import settings\nfrom shopapi.core.errors import ConflictError\n"
        "from shopapi.services.orders import cancel_order, create_order, mark_paid, order_total\n"
        "from tests.factories import make_cart, make_coupon, make_order, make_product\n",
        _DB_PARAM,
        [
            (
                "test_create_order_sets_pending_status",
                'order = create_order(db_session, make_cart(db_session))\nassert order.status == "pending"',
            ),
            (
                "test_create_order_rejects_empty_cart",
                "cart = make_cart(db_session)\ncart.items.clear()\nwith pytest.raises(ConflictError):\n"
                "    create_order(db_session, cart)",
            ),
            (
                "test_order_total_includes_tax",
                'order = make_order(db_session, subtotal=Decimal("100.00"))\n'
                'assert order_total(order) == Decimal("119.00")',
            ),
            (
                "test_coupon_discount_is_applied",
                'cart = make_cart(db_session, price=Decimal("80.00"))\n'
                'make_coupon(db_session, code="SPRING10", percent=10)\n'
                'order = create_order(db_session, cart, coupon_code="SPRING10")\n'
                'assert order.discount == Decimal("8.00")',
            ),
            (
                "test_free_shipping_over_threshold",
                "order = create_order(db_session, make_cart(db_session, price=settings.free_shipping_over))\n"
                'assert order.shipping == Decimal("0.00")',
            ),
            (
                "test_mark_paid_sets_timestamp",
                "order = mark_paid(db_session, make_order(db_session))\nassert order.paid_at is not None",
            ),
            (
                "test_cancel_order_releases_stock",
                "product = make_product(db_session, stock=3)\n"
                "order = create_order(db_session, make_cart(db_session, product=product, quantity=2))\n"
                "cancel_order(db_session, order.id)\nassert product.reserved == 0",
            ),
            (
                "test_cannot_cancel_shipped_order",
                'order = make_order(db_session, status="shipped")\nwith pytest.raises(ConflictError):\n'
                "    cancel_order(db_session, order.id)",
            ),
        ],
    ),
    "tests/test_carts.py": (
        "from datetime import datetime, timedelta\nfrom decimal import Decimal\n\nimport pytest\n"
        + _IMP_SESSION
        + "\nfrom shopapi.core.config import settings\n"
        "from shopapi.services.carts import (\n    add_item,\n    cart_subtotal,\n    expire_stale_carts,\n"
        "    get_or_create_cart,\n    remove_item,\n)\n"
        "from tests.factories import make_product, make_user\n",
        _DB_PARAM,
        [
            (
                "test_get_or_create_cart_is_idempotent",
                "user = make_user(db_session)\n"
                "assert get_or_create_cart(db_session, user.id).id == get_or_create_cart(db_session, user.id).id",
            ),
            (
                "test_add_item_merges_quantities",
                "cart = get_or_create_cart(db_session, make_user(db_session).id)\nproduct = make_product(db_session)\n"
                "add_item(db_session, cart, product.id, 2)\nadd_item(db_session, cart, product.id, 3)\n"
                "assert cart.items[0].quantity == 5",
            ),
            (
                "test_add_item_rejects_zero_quantity",
                "cart = get_or_create_cart(db_session, make_user(db_session).id)\nwith pytest.raises(ValueError):\n"
                "    add_item(db_session, cart, make_product(db_session).id, 0)",
            ),
            (
                "test_remove_item",
                "cart = get_or_create_cart(db_session, make_user(db_session).id)\nproduct = make_product(db_session)\n"
                "add_item(db_session, cart, product.id)\nremove_item(db_session, cart, product.id)\n"
                "assert cart.items == []",
            ),
            (
                "test_cart_subtotal_rounds",
                "cart = get_or_create_cart(db_session, make_user(db_session).id)\n"
                'add_item(db_session, cart, make_product(db_session, price=Decimal("19.99")).id, 3)\n'
                'assert cart_subtotal(db_session, cart) == Decimal("59.97")',
            ),
            (
                "test_expire_stale_carts",
                "get_or_create_cart(db_session, make_user(db_session).id)\n"
                "later = datetime.utcnow() + timedelta(hours=settings.cart_ttl_hours + 1)\n"
                "assert expire_stale_carts(db_session, later) == 1",
            ),
        ],
    ),
    "tests/test_payments.py": (
        "from dataclasses import replace\nfrom decimal import Decimal\n\nimport pytest\n" + _IMP_SESSION + "\n"
        "from shopapi.core.config import settings\n"
        "from shopapi.services.payments import capture_payment, refund_payment\n"
        "from tests.factories import make_order\n",
        _DB_PARAM + ", monkeypatch: pytest.MonkeyPatch",
        [
            (
                "test_capture_with_fake_provider",
                _FAKE_PROVIDER + "order = make_order(db_session)\n"
                'assert capture_payment(db_session, order, "tok_visa").provider_ref == f"fake_{order.id}"',
            ),
            (
                "test_capture_uses_order_total",
                _FAKE_PROVIDER + 'order = make_order(db_session, subtotal=Decimal("42.00"))\n'
                'assert capture_payment(db_session, order, "tok_visa").amount == order.total',
            ),
            (
                "test_refund_full_amount",
                _FAKE_PROVIDER + 'payment = capture_payment(db_session, make_order(db_session), "tok_visa")\n'
                'assert refund_payment(db_session, payment).status == "refunded"',
            ),
            (
                "test_partial_refund",
                _FAKE_PROVIDER + 'payment = capture_payment(db_session, make_order(db_session), "tok_visa")\n'
                'assert refund_payment(db_session, payment, Decimal("10.00")).status == "partially_refunded"',
            ),
            (
                "test_refund_more_than_captured_fails",
                _FAKE_PROVIDER + 'payment = capture_payment(db_session, make_order(db_session), "tok_visa")\n'
                "with pytest.raises(ValueError):\n"
                '    refund_payment(db_session, payment, Decimal("1000.00"))',
            ),
        ],
    ),
    "tests/test_coupons.py": (
        "from datetime import datetime\nfrom decimal import Decimal\n\nimport pytest\n" + _IMP_SESSION + "\n"
        "from shopapi.core.errors import ConflictError, NotFoundError\n"
        "from shopapi.services.coupons import discount_for, find_coupon\nfrom tests.factories import make_coupon\n",
        _DB_PARAM,
        [
            (
                "test_find_coupon_is_case_insensitive",
                'make_coupon(db_session, code="WELCOME5", amount_off=Decimal("5.00"))\n'
                'assert find_coupon(db_session, " welcome5 ").code == "WELCOME5"',
            ),
            (
                "test_unknown_coupon_raises",
                'with pytest.raises(NotFoundError):\n    find_coupon(db_session, "NOPE")',
            ),
            (
                "test_expired_coupon_rejected",
                'make_coupon(db_session, code="OLD", percent=10, valid_until=datetime(2020, 1, 1))\n'
                'with pytest.raises(ConflictError):\n    find_coupon(db_session, "OLD")',
            ),
            (
                "test_used_up_coupon_rejected",
                'coupon = make_coupon(db_session, code="ONCE", percent=10, max_uses=1)\ncoupon.used_count = 1\n'
                'with pytest.raises(ConflictError):\n    find_coupon(db_session, "ONCE")',
            ),
            (
                "test_percent_discount",
                'assert discount_for(make_coupon(db_session, percent=15), Decimal("40.00")) == Decimal("6.00")',
            ),
            (
                "test_amount_discount_never_exceeds_subtotal",
                'coupon = make_coupon(db_session, amount_off=Decimal("25.00"))\n'
                'assert discount_for(coupon, Decimal("19.99")) == Decimal("19.99")',
            ),
        ],
    ),
    "tests/test_inventory.py": (
        "import pytest\n" + _IMP_SESSION + "\n"
        "from shopapi.services.inventory import OutOfStockError, low_stock_products, release_stock, reserve_stock\n"
        "from tests.factories import make_product\n",
        _DB_PARAM,
        [
            (
                "test_reserve_stock_increments_reserved",
                "product = make_product(db_session, stock=10)\nreserve_stock(db_session, product, 4)\n"
                "assert product.reserved == 4",
            ),
            (
                "test_reserve_more_than_available_raises",
                "product = make_product(db_session, stock=2)\nwith pytest.raises(OutOfStockError):\n"
                "    reserve_stock(db_session, product, 3)",
            ),
            (
                "test_release_stock_never_negative",
                "product = make_product(db_session, stock=5)\nrelease_stock(db_session, product.id, 2)\n"
                "assert product.reserved == 0",
            ),
            ("test_release_missing_product_is_ignored", "release_stock(db_session, 999_999, 1)"),
            (
                "test_low_stock_products_lists_threshold",
                'product = make_product(db_session, sku="LOW-1", stock=2)\n'
                "assert product in low_stock_products(db_session)",
            ),
        ],
    ),
    "tests/test_shipping.py": (
        "from datetime import date\nfrom decimal import Decimal\n\nfrom shopapi.core.config import settings\n"
        "from shopapi.services.shipping import estimate_delivery, shipping_cost\n",
        "",
        [
            (
                "test_flat_shipping_below_threshold",
                'assert shipping_cost(Decimal("20.00")) == settings.flat_shipping',
            ),
            (
                "test_free_shipping_at_threshold",
                'assert shipping_cost(settings.free_shipping_over) == Decimal("0.00")',
            ),
            (
                "test_express_always_costs",
                'assert shipping_cost(Decimal("500.00"), express=True) == Decimal("12.40")',
            ),
            (
                "test_estimate_delivery_skips_weekend",
                "assert estimate_delivery(date(2024, 11, 15)) == date(2024, 11, 20)",
            ),
            (
                "test_express_delivery_next_business_day",
                "assert estimate_delivery(date(2024, 11, 15), express=True) == date(2024, 11, 18)",
            ),
        ],
    ),
    "tests/test_money.py": (
        "from decimal import Decimal\n\nfrom shopapi.core.config import settings\n"
        "from shopapi.utils.money import format_price, from_cents, round_money, to_cents\n",
        "",
        [
            ("test_round_money_half_up", 'assert round_money(Decimal("2.675")) == Decimal("2.68")'),
            ("test_to_cents", 'assert to_cents(Decimal("19.99")) == 1999'),
            ("test_from_cents", 'assert from_cents(1050) == Decimal("10.50")'),
            ("test_format_price_eur", 'assert format_price(Decimal("1234.5"), "EUR") == "€1,234.50"'),
            ("test_format_price_jpy", 'assert format_price(Decimal("1500"), "JPY") == "¥1,500"'),
            (
                "test_format_price_uses_default_currency",
                'assert format_price(Decimal("3")) == format_price(Decimal("3"), settings.currency)',
            ),
        ],
    ),
    "tests/test_pagination.py": (
        "from shopapi.core.config import settings\nfrom shopapi.utils.pagination import clamp_limit, page_links\n",
        "",
        [
            ("test_clamp_limit_default", "assert clamp_limit(None) == settings.page_size"),
            ("test_clamp_limit_max", "assert clamp_limit(10_000) == settings.page_size_max"),
            ("test_clamp_limit_negative", "assert clamp_limit(-5) == settings.page_size"),
            (
                "test_page_links_first_page",
                'assert page_links("/api/v1/products", 0, 20, 45) == {"next": "/api/v1/products?offset=20&limit=20"}',
            ),
            (
                "test_page_links_last_page",
                'assert page_links("/api/v1/products", 40, 20, 45) == {"prev": "/api/v1/products?offset=20&limit=20"}',
            ),
        ],
    ),
    "tests/test_config.py": (
        "from decimal import Decimal\n\nimport pytest\n\n"
        "from shopapi.core.config import Settings, get_settings, settings\n",
        "",
        [
            ("test_defaults_are_development", 'assert Settings().env == "development"'),
            ("test_tax_rate_is_decimal", "assert isinstance(settings.tax_rate, Decimal)"),
            ("test_settings_are_cached", "assert get_settings() is get_settings()"),
            (
                "test_env_override",
                'with pytest.MonkeyPatch.context() as mp:\n    mp.setenv("SHOPAPI_DB_POOL_SIZE", "25")\n'
                "    assert Settings().db_pool_size == 25",
            ),
            (
                "test_is_production",
                'with pytest.MonkeyPatch.context() as mp:\n    mp.setenv("SHOPAPI_ENV", "production")\n'
                "    assert Settings().is_production",
            ),
        ],
    ),
    "tests/test_api_products.py": (
        "from fastapi.testclient import TestClient\n" + _IMP_SESSION + "\n"
        "from shopapi.core.config import settings\nfrom shopapi.core.security import create_access_token\n"
        "from tests.factories import make_product, make_user\n\nBASE = '/api/v1/products'\n",
        "client: TestClient, " + _DB_PARAM,
        [
            (
                "test_list_products_paginates",
                'for i in range(3):\n    make_product(db_session, sku=f"P-{i}")\n'
                'response = client.get(f"{BASE}?limit=2")\nassert len(response.json()) == 2',
            ),
            (
                "test_show_missing_product_returns_404",
                'assert client.get(f"{BASE}/424242").status_code == 404',
            ),
            (
                "test_create_product_requires_admin",
                "token = create_access_token(make_user(db_session).id)\n"
                'body = {"sku": "N-1", "name": "New", "price": "3.50"}\n'
                'response = client.post(BASE, json=body, headers={"Authorization": f"Bearer {token}"})\n'
                "assert response.status_code == 403",
            ),
            (
                "test_create_product_as_admin",
                "token = create_access_token(make_user(db_session, is_admin=True).id)\n"
                'body = {"sku": "N-2", "name": "Newer", "price": "3.50"}\n'
                'response = client.post(BASE, json=body, headers={"Authorization": f"Bearer {token}"})\n'
                "assert response.status_code == 201",
            ),
            (
                "test_search_needs_two_characters",
                'assert client.get(f"{BASE}/search", params={"q": "a"}).json() == []',
            ),
            (
                "test_default_page_size",
                "for i in range(settings.page_size + 1):\n"
                '    make_product(db_session, sku=f"D-{i}")\n'
                "assert len(client.get(BASE).json()) == settings.page_size",
            ),
        ],
    ),
    "tests/test_api_orders.py": (
        "from fastapi.testclient import TestClient\n" + _IMP_SESSION + "\n"
        "from shopapi.core.config import settings\nfrom shopapi.core.security import create_access_token\n"
        "from tests.factories import make_cart, make_order\n\nBASE = '/api/v1/orders'\n",
        "client: TestClient, " + _DB_PARAM,
        [
            (
                "test_place_order_from_cart",
                "cart = make_cart(db_session)\n"
                "headers = {'Authorization': f'Bearer {create_access_token(cart.user_id)}'}\n"
                "response = client.post(BASE, json={}, headers=headers)\nassert response.status_code == 201",
            ),
            (
                "test_place_order_with_empty_cart_conflicts",
                "cart = make_cart(db_session)\ncart.items.clear()\n"
                "headers = {'Authorization': f'Bearer {create_access_token(cart.user_id)}'}\n"
                "assert client.post(BASE, json={}, headers=headers).status_code == 409",
            ),
            (
                "test_get_other_users_order_is_404",
                "order = make_order(db_session)\nother = make_cart(db_session).user_id\n"
                "headers = {'Authorization': f'Bearer {create_access_token(other)}'}\n"
                "assert client.get(f'{BASE}/{order.id}', headers=headers).status_code == 404",
            ),
            (
                "test_list_orders_uses_page_size",
                "order = make_order(db_session)\n"
                "headers = {'Authorization': f'Bearer {create_access_token(order.user_id)}'}\n"
                "response = client.get(BASE, params={'limit': settings.page_size_max + 5}, headers=headers)\n"
                "assert response.status_code == 200",
            ),
        ],
    ),
}

_PACKAGE_JSON = """{
  "name": "shop-admin",
  "version": "0.3.0",
  "private": true,
  "type": "module",
  "scripts": {
    "build": "tsc -p .",
    "typecheck": "tsc --noEmit",
    "test": "vitest run"
  },
  "devDependencies": {
    "typescript": "^5.6.3",
    "vitest": "^2.1.4"
  }
}
"""

_TSCONFIG = """{
  "compilerOptions": {
    "target": "ES2022",
    "module": "ESNext",
    "moduleResolution": "Bundler",
    "strict": true,
    "noUncheckedIndexedAccess": true,
    "outDir": "dist"
  },
  "include": ["src"]
}
"""

_FORMAT_TS = """export function formatPrice(cents: number, currency = "EUR", locale = "de-DE"): string {
  return new Intl.NumberFormat(locale, { style: "currency", currency }).format(cents / 100);
}

export function parsePrice(text: string): number {
  const cleaned = text.replace(/[^0-9,.-]/g, "").replace(",", ".");
  const value = Number.parseFloat(cleaned);
  if (Number.isNaN(value)) {
    throw new Error(`not a price: ${text}`);
  }
  return Math.round(value * 100);
}
"""

_CART_TS = """import { formatPrice } from "./format";

export interface CartLine {
  sku: string;
  name: string;
  priceCents: number;
  qty: number;
}

export interface Cart {
  lines: CartLine[];
  currency: string;
}

export interface Coupon {
  percent?: number;
  amountOffCents?: number;
}

export interface Totals {
  subtotalCents: number;
  discountCents: number;
  totalCents: number;
}

export function subtotalCents(cart: Cart): number {
  return cart.lines.reduce((sum, line) => sum + line.priceCents * line.qty, 0);
}

export function applyCoupon(cart: Cart, coupon: Coupon | null): Totals {
  const subtotal = subtotalCents(cart);
  let discount = 0;
  if (coupon?.percent !== undefined) {
    discount = Math.round((subtotal * coupon.percent) / 100);
  } else if (coupon?.amountOffCents !== undefined) {
    discount = coupon.amountOffCents;
  }
  discount = Math.min(discount, subtotal);
  return { subtotalCents: subtotal, discountCents: discount, totalCents: subtotal - discount };
}

export function cartSummary(cart: Cart): string {
  if (cart.lines.length === 0) {
    return "Your cart is empty";
  }
  const count = cart.lines.reduce((sum, line) => sum + line.qty, 0);
  return `${count} items, ${formatPrice(subtotalCents(cart), cart.currency)}`;
}
"""

_CART_TEST_TS = """import { describe, expect, it } from "vitest";
import { applyCoupon, cartSummary, subtotalCents, type Cart } from "./cart";

function makeCart(lines: Cart["lines"]): Cart {
  return { lines, currency: "EUR" };
}

describe("cart totals", () => {
  it("sums line prices", () => {
    const cart = makeCart([{ sku: "A-1", name: "Mug", priceCents: 990, qty: 2 }]);
    expect(subtotalCents(cart)).toBe(1980);
  });

  it("applies a percentage coupon", () => {
    const cart = makeCart([{ sku: "A-1", name: "Lamp", priceCents: 10000, qty: 1 }]);
    const total = applyCoupon(cart, { percent: 10 });
    expect(total.totalCents).toBe(9000);
  });

  it("applies a fixed coupon", () => {
    const cart = makeCart([{ sku: "A-1", name: "Lamp", priceCents: 10000, qty: 1 }]);
    expect(applyCoupon(cart, { amountOffCents: 500 }).totalCents).toBe(9500);
  });

  it("never goes below zero", () => {
    const cart = makeCart([{ sku: "A-2", name: "Pen", priceCents: 300, qty: 1 }]);
    expect(applyCoupon(cart, { amountOffCents: 500 }).totalCents).toBe(0);
  });
});

describe("formatting", () => {
  it("formats euros", () => {
    const cart = makeCart([{ sku: "A-1", name: "Mug", priceCents: 1250, qty: 1 }]);
    expect(cartSummary(cart)).toBe("1 items, 12,50 €");
  });

  it("shows an empty cart", () => {
    expect(cartSummary(makeCart([]))).toBe("Your cart is empty");
  });
});
"""

_VITEST_CASES = [
    ("cart totals", "sums line prices"),
    ("cart totals", "applies a percentage coupon"),
    ("cart totals", "applies a fixed coupon"),
    ("cart totals", "never goes below zero"),
    ("formatting", "formats euros"),
    ("formatting", "shows an empty cart"),
]

_CARGO_TOML = """[package]
name = "pricing"
version = "0.1.0"
edition = "2021"

[lib]
name = "pricing"
crate-type = ["cdylib", "rlib"]

[dependencies]
"""

_LIB_RS = """//! Price arithmetic in integer cents, shared with the Python service through a small C ABI.

/// Rounds an amount in tenths of a cent to whole cents, half to even.
pub fn round_half_even(tenths: i64) -> i64 {
    let whole = tenths.div_euclid(10);
    let rest = tenths.rem_euclid(10);
    match rest {
        0..=4 => whole,
        6..=9 => whole + 1,
        _ => whole + (whole & 1),
    }
}

/// Adds tax given in basis points (1900 = 19%).
pub fn with_tax(cents: i64, basis_points: i64) -> i64 {
    round_half_even(cents * (10_000 + basis_points) / 1_000)
}

/// A discount never makes the amount negative.
pub fn apply_discount(cents: i64, discount: i64) -> i64 {
    (cents - discount).max(0)
}

pub fn parse_amount(text: &str) -> Option<i64> {
    let (whole, frac) = text.trim().split_once('.').unwrap_or((text.trim(), "0"));
    let frac = format!("{:0<2}", frac);
    Some(whole.parse::<i64>().ok()? * 100 + frac[..2].parse::<i64>().ok()?)
}

#[no_mangle]
pub extern "C" fn pricing_with_tax(cents: i64, basis_points: i64) -> i64 {
    with_tax(cents, basis_points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_half_even() {
        assert_eq!(round_half_even(125), 12);
        assert_eq!(round_half_even(135), 14);
    }

    #[test]
    fn tax_is_added() {
        assert_eq!(with_tax(10_000, 1_900), 11_900);
    }

    #[test]
    fn discount_never_negative() {
        assert_eq!(apply_discount(300, 500), 0);
    }

    #[test]
    fn parses_amounts() {
        assert_eq!(parse_amount("12.5"), Some(1250));
        assert_eq!(parse_amount("7"), Some(700));
    }
}
"""

_CARGO_TESTS = [
    "tests::discount_never_negative",
    "tests::parses_amounts",
    "tests::rounds_half_even",
    "tests::tax_is_added",
]

_PYPROJECT = """[project]
name = "shopapi"
version = "0.7.2"
description = "Backend of the shop: catalog, carts, orders and payments"
requires-python = ">=3.11"
dependencies = [
    "fastapi==0.115.4",
    "uvicorn[standard]==0.32.0",
    "sqlalchemy==2.0.35",
    "psycopg[binary]==3.2.3",
    "pydantic[email]==2.9.2",
    "httpx==0.27.2",
    "alembic==1.13.3",
]

[project.optional-dependencies]
dev = [
    "pytest==8.3.3",
    "pytest-cov==5.0.0",
    "ruff==0.7.2",
    "mypy==1.13.0",
]

[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[tool.setuptools.packages.find]
include = ["shopapi*"]

[tool.pytest.ini_options]
testpaths = ["tests"]

[tool.ruff]
line-length = 110
target-version = "py311"

[tool.ruff.lint]
select = ["E", "F", "I", "B", "UP"]

[tool.mypy]
strict = true
plugins = ["pydantic.mypy"]
"""

_README = """# shopapi

Backend of the shop: catalog, carts, orders, coupons and payments, served with FastAPI on
PostgreSQL. The admin front end lives in `frontend/` (TypeScript), and the price arithmetic
shared with the point-of-sale app in `native/` (Rust).

## Development

```sh
python -m venv .venv && . .venv/bin/activate
pip install -e ".[dev]"
docker compose up -d db
alembic upgrade head
python scripts/seed_data.py
uvicorn shopapi.main:app --reload
```

The API is then at http://localhost:8000/api/v1 (OpenAPI docs at /docs).

## Configuration

All settings come from environment variables prefixed `SHOPAPI_` (see
`shopapi/core/config.py`): `SHOPAPI_DATABASE_URL`, `SHOPAPI_SECRET_KEY`,
`SHOPAPI_STRIPE_API_KEY`, `SHOPAPI_SMTP_HOST`, ...

## Tests

```sh
pytest            # unit and API tests, in-memory SQLite
ruff check . && mypy shopapi
cd frontend && npm test
cargo test --manifest-path native/Cargo.toml
```

## Layout

- `shopapi/core`: settings, database, security, errors
- `shopapi/models`: SQLAlchemy models
- `shopapi/schemas`: request and response bodies
- `shopapi/services`: business rules (no HTTP in here)
- `shopapi/api`: routes and dependencies
- `shopapi/workers`: the e-mail worker and the nightly cleanup
"""

_MAKEFILE = """.PHONY: test lint run seed

test:
\tpytest -q

lint:
\truff check . && ruff format --check . && mypy shopapi

run:
\tuvicorn shopapi.main:app --reload

seed:
\tpython scripts/seed_data.py
"""


def _init(doc: str) -> str:
    return f'"""{doc}"""\n'


def _test_module(header: str, params: str, cases: list[tuple[str, str]]) -> str:
    parts = ["from __future__ import annotations\n\n" + header]
    for name, body in cases:
        lines = "\n".join("    " + line for line in body.split("\n"))
        parts.append(f"def {name}({params}) -> None:\n{lines}\n")
    return "\n\n".join(parts)


_REPO_CACHE: dict[str, str] = {}


def repo_files() -> dict[str, str]:
    """The repository every session works in: relative path -> file text."""
    if not _REPO_CACHE:
        _REPO_CACHE.update(_build_repo())
    return dict(_REPO_CACHE)


_STATIC_FILES = {
    "pyproject.toml": _PYPROJECT,
    "README.md": _README,
    "Makefile": _MAKEFILE,
    "shopapi/__init__.py": '"""shopapi: the shop backend."""\n\n__version__ = "0.7.2"\n',
    "shopapi/main.py": _MAIN,
    "shopapi/cli.py": _CLI,
    "shopapi/core/__init__.py": _init("Settings, database, security and errors."),
    "shopapi/core/config.py": _CONFIG,
    "shopapi/core/db.py": _DB_MODULE,
    "shopapi/core/security.py": _SECURITY,
    "shopapi/core/errors.py": _ERRORS,
    "shopapi/core/logsetup.py": _LOGSETUP,
    "shopapi/models/__init__.py": _init("SQLAlchemy models; import them from their modules."),
    "shopapi/models/user.py": _MODEL_USER,
    "shopapi/models/product.py": _MODEL_PRODUCT,
    "shopapi/models/order.py": _MODEL_ORDER,
    "shopapi/models/cart.py": _MODEL_CART,
    "shopapi/models/payment.py": _MODEL_PAYMENT,
    "shopapi/models/review.py": _MODEL_REVIEW,
    "shopapi/models/coupon.py": _MODEL_COUPON,
    "shopapi/schemas/__init__.py": _init("Pydantic request and response bodies."),
    "shopapi/schemas/user.py": _SCHEMA_USER,
    "shopapi/schemas/product.py": _SCHEMA_PRODUCT,
    "shopapi/schemas/order.py": _SCHEMA_ORDER,
    "shopapi/schemas/payment.py": _SCHEMA_PAYMENT,
    "shopapi/services/__init__.py": _init("Business rules. Services take a Session and never touch HTTP."),
    "shopapi/services/users.py": _SVC_USERS,
    "shopapi/services/catalog.py": _SVC_CATALOG,
    "shopapi/services/orders.py": _SVC_ORDERS,
    "shopapi/services/carts.py": _SVC_CARTS,
    "shopapi/services/payments.py": _SVC_PAYMENTS,
    "shopapi/services/reviews.py": _SVC_REVIEWS,
    "shopapi/services/coupons.py": _SVC_COUPONS,
    "shopapi/services/inventory.py": _SVC_INVENTORY,
    "shopapi/services/emails.py": _SVC_EMAILS,
    "shopapi/services/shipping.py": _SVC_SHIPPING,
    "shopapi/utils/__init__.py": _init("Small helpers without database access."),
    "shopapi/utils/money.py": _UTIL_MONEY,
    "shopapi/utils/dates.py": _UTIL_DATES,
    "shopapi/utils/pagination.py": _UTIL_PAGINATION,
    "shopapi/utils/slugs.py": _UTIL_SLUGS,
    "shopapi/api/__init__.py": _init("HTTP layer."),
    "shopapi/api/deps.py": _API_DEPS,
    "shopapi/api/router.py": _API_ROUTER,
    "shopapi/api/routes/__init__.py": _init("One module per resource."),
    "shopapi/api/routes/users.py": _ROUTE_USERS,
    "shopapi/api/routes/products.py": _ROUTE_PRODUCTS,
    "shopapi/api/routes/carts.py": _ROUTE_CARTS,
    "shopapi/api/routes/orders.py": _ROUTE_ORDERS,
    "shopapi/api/routes/payments.py": _ROUTE_PAYMENTS,
    "shopapi/api/routes/health.py": _ROUTE_HEALTH,
    "shopapi/workers/__init__.py": _init("Background workers, run as separate processes."),
    "shopapi/workers/email_worker.py": _WORKER_EMAIL,
    "shopapi/workers/cleanup.py": _WORKER_CLEANUP,
    "migrations/env.py": _MIGRATIONS_ENV,
    "scripts/seed_data.py": _SCRIPT_SEED,
    "scripts/export_orders.py": _SCRIPT_EXPORT,
    "tests/conftest.py": _CONFTEST,
    "tests/factories.py": _FACTORIES,
    "frontend/package.json": _PACKAGE_JSON,
    "frontend/tsconfig.json": _TSCONFIG,
    "frontend/src/format.ts": _FORMAT_TS,
    "frontend/src/cart.ts": _CART_TS,
    "frontend/src/cart.test.ts": _CART_TEST_TS,
    "native/Cargo.toml": _CARGO_TOML,
    "native/src/lib.rs": _LIB_RS,
}


def _build_repo() -> dict[str, str]:
    files = dict(_STATIC_FILES)
    for path, (header, params, cases) in _TEST_SPECS.items():
        files[path] = _test_module(header, params, cases)
    return dict(sorted(files.items()))


def _importers(files: dict[str, str]) -> dict[str, int]:
    """How many files import each repository file (Python modules and relative TypeScript imports)."""
    found: dict[str, set[str]] = {}
    for path, text in files.items():
        targets: set[str] = set()
        if path.endswith(".py"):
            for match in re.finditer(r"^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n]+)", text, re.M):
                module, names = match.group(1), [n.strip(" \t\n()") for n in match.group(2).split(",")]
                candidates = [module] + [f"{module}.{name}" for name in names if name]
                targets.update(_module_file(c, files) for c in candidates)
            for match in re.finditer(r"^[ \t]*import[ \t]+([\w.]+)", text, re.M):
                targets.add(_module_file(match.group(1), files))
        elif path.endswith(".ts"):
            folder = path.rsplit("/", 1)[0]
            for match in re.finditer(r'from\s+"\./([\w./-]+)"', text):
                targets.add(f"{folder}/{match.group(1)}.ts")
        for target in targets - {"", path}:
            if target in files:
                found.setdefault(target, set()).add(path)
    return {path: len(importers) for path, importers in sorted(found.items())}


def _module_file(module: str, files: dict[str, str]) -> str:
    base = module.replace(".", "/")
    for candidate in (base + ".py", base + "/__init__.py"):
        if candidate in files:
            return candidate
    return ""


# ---------------------------------------------------------------- small helpers


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _token(rng: random.Random, n: int) -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(rng.choice(alphabet) for _ in range(n))


def _addr(rng: random.Random) -> str:
    return f"0x7f{rng.getrandbits(36):09x}0"


def _bar(text: str, fill: str = "=") -> str:
    return f" {text} ".center(80, fill) if text else fill * 80


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def _function_lines(text: str, name: str) -> tuple[int, list[str]]:
    """The 1-based line of top-level ``def name(`` and the function's lines (signature and body)."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith((f"def {name}(", f"async def {name}(")):
            end = i + 1
            while end < len(lines) and (lines[end].startswith((" ", "\t", ")")) or not lines[end].strip()):
                end += 1
            body = lines[i:end]
            while body and not body[-1].strip():
                body.pop()
            return i + 1, body
    raise KeyError(name)


def _functions(text: str) -> list[str]:
    return re.findall(r"^(?:async )?def ([a-zA-Z]\w*)\(", text, re.M)


def _test_names(text: str) -> list[str]:
    return re.findall(r"^def (test_\w+)\(", text, re.M)


def _line_no(text: str, snippet: str) -> int:
    index = text.find(snippet)
    return 0 if index < 0 else text.count("\n", 0, index) + 1


def _imported(text: str) -> list[tuple[str, str]]:
    """(module path, name) for every ``from shopapi... import name`` / ``from tests... import name``."""
    found = []
    for match in re.finditer(r"^from ((?:shopapi|tests)[\w.]*) import (\([^)]*\)|[^\n]+)", text, re.M):
        path = match.group(1).replace(".", "/") + ".py"
        for name in match.group(2).strip("()").split(","):
            if name.strip():
                found.append((path, name.strip()))
    return found


def _normalize(text: str) -> str:
    """A failure's text with what may differ between identical failures masked."""
    text = re.sub(r"0x[0-9a-fA-F]+", "0x?", text)
    text = re.sub(r"/tmp/\S+", "/tmp/?", text)
    text = re.sub(r"\b[0-9a-f]{8,}\b", "#", text)
    return re.sub(r"\d+(?:\.\d+)?", "#", text)


def _quote(pattern: str) -> str:
    if not re.search(r"[\"$`\\]", pattern):
        return f'"{pattern}"'
    return "'" + pattern.replace("'", "'\"'\"'") + "'"


# ---------------------------------------------------------------- failures


@dataclass(frozen=True)
class _Fail:
    """One reproducible error: what fails, where, and the message (``{n}`` and ``{addr}`` vary per run)."""

    tool: str  # pytest, collect, mypy, tsc, cargo, cargo-test, vitest
    target: str  # the test file, or the file holding the error
    test: str = ""  # the failing test (pytest, vitest, cargo-test)
    message: str = ""  # the error line
    call: str = ""  # pytest: the test line that fails (or calls into ``frame``)
    frame: tuple[str, str, str] | None = None  # pytest: (module path, function, failing line) below the test
    detail: tuple[str, ...] = ()  # further error lines
    origin: str = ""  # pytest: the module defining the function the failing test line calls

    @property
    def kind(self) -> str:
        return self.message.split(":", 1)[0]


_DEEP_FAMILIES: dict[str, tuple[str, Callable[[re.Match[str]], str]]] = {
    "type-op": (
        r"\w[\w.)\]]* ([+*/-]) [\w(]",
        lambda m: f"TypeError: unsupported operand type(s) for {m.group(1)}: 'decimal.Decimal' and 'float'",
    ),
    "attr-none": (
        r"\b(?!session\b|settings\b|logger\b|self\b|datetime\b|timezone\b|re\b)([a-z_]+)\.([a-z_]+)\b(?!\()",
        lambda m: f"AttributeError: 'NoneType' object has no attribute '{m.group(2)}'",
    ),
    "name": (r"\b(Decimal|settings|logger|select)\b", lambda m: f"NameError: name '{m.group(1)}' is not defined"),
    "zero": (r" / ", lambda m: "ZeroDivisionError: division by zero"),
    "key": (r"\[\"(\w+)\"\]", lambda m: f"KeyError: '{m.group(1)}'"),
}


def _calls(files: dict[str, str], test_path: str) -> list[tuple[str, str, str, str]]:
    """(test, test line, module, function) for each call from a test into a function the test file imports."""
    text = files[test_path]
    imported = [(m, n) for m, n in _imported(text) if m in files and n in _functions(files[m])]
    found = []
    for test in _test_names(text):
        _, body = _function_lines(text, test)
        for line in body[1:]:
            for module, name in imported:
                if re.search(rf"\b{name}\(", line) and not line.strip().startswith("def "):
                    found.append((test, line.strip(), module, name))
    return found


def _deep_fail(files: dict[str, str], test_path: str, family: str, rng: random.Random) -> _Fail | None:
    pattern, message = _DEEP_FAMILIES[family]
    options = []
    for test, call, module, name in _calls(files, test_path):
        _, body = _function_lines(files[module], name)
        source = "\n".join(body)
        params = re.findall(r"(\w+):", " ".join(body[:3]).split("->")[0])
        for line in body[1:]:
            stripped = line.strip()
            if stripped.startswith(("def ", "#", '"', "raise ", "logger.", "from ", "import ")) or not stripped:
                continue
            match = re.search(pattern, stripped)
            if match and family == "attr-none":
                var = match.group(1)
                if var not in params and not re.search(rf"^\s+{var} = ", source, re.M):
                    continue
            if match:
                options.append(_Fail("pytest", test_path, test, message(match), call, (module, name, stripped)))
    return rng.choice(options) if options else None


def _assert_fail(files: dict[str, str], test_path: str, rng: random.Random) -> _Fail | None:
    text = files[test_path]
    options = []
    for test in _test_names(text):
        _, body = _function_lines(text, test)
        match = re.match(r"\s*assert (.+) == (.+)$", body[-1])
        if match:
            expected = match.group(2)
            got = _other_value(expected, rng)
            if "status_code" in match.group(1):
                got = rng.choice(
                    [c for c in ("200", "201", "400", "401", "403", "404", "409", "422", "500") if c != expected]
                )
            options.append(_Fail("pytest", test_path, test, f"assert {got} == {_repr(expected)}", body[-1].strip()))
    return rng.choice(options) if options else None


def _repr(literal: str) -> str:
    literal = literal.strip()
    match = re.fullmatch(r'Decimal\("([\d.]+)"\)', literal)
    if match:
        return f"Decimal('{match.group(1)}')"
    if re.fullmatch(r'"[^"]*"', literal):
        return "'" + literal[1:-1] + "'"
    return literal


def _other_value(literal: str, rng: random.Random) -> str:
    literal = literal.strip()
    match = re.fullmatch(r'Decimal\("(\d+)\.(\d\d)"\)', literal)
    if match:
        whole = int(match.group(1)) + rng.choice([-3, -1, 1, 2, 7]) if int(match.group(1)) > 3 else 1
        return f"Decimal('{whole}.{rng.choice(['00', '01', '99', match.group(2)])}')"
    if re.fullmatch(r"-?\d[\d_]*", literal):
        return str(int(literal.replace("_", "")) + rng.choice([-1, 1, 2]))
    if re.fullmatch(r'"[^"]*"', literal):
        return "'" + rng.choice(["created", "", "None", literal[1:-1].upper()]) + "'"
    return rng.choice(["None", "[]", "0", "{}"])


def _call_fail(files: dict[str, str], test_path: str, family: str, rng: random.Random) -> _Fail | None:
    """A TypeError calling a function whose signature changed (a keyword renamed, a parameter added)."""
    options = []
    for test, call, module, name in _calls(files, test_path):
        _, body = _function_lines(files[module], name)
        signature = body[0]
        if family == "type-kw":
            for keyword in re.findall(r"\b(\w+)=", call.split(f"{name}(", 1)[1]):
                if any(re.search(rf"^\s*{keyword}:", ln) or f", {keyword}:" in ln for ln in body[:8]):
                    message = f"TypeError: {name}() got an unexpected keyword argument '{keyword}'"
                    options.append(_Fail("pytest", test_path, test, message, call, origin=module))
        elif ") ->" in signature and "*" not in signature and signature.endswith(":"):
            arg = rng.choice(("currency", "now", "actor_id", "request_id"))
            message = f"TypeError: {name}() missing 1 required positional argument: '{arg}'"
            options.append(_Fail("pytest", test_path, test, message, call, origin=module))
    return rng.choice(options) if options else None


_MISSING_MODULES = (
    ("freezegun", "from freezegun import freeze_time"),
    ("respx", "import respx"),
    ("shopapi.services.tax", "from shopapi.services.tax import add_tax"),
    ("shopapi.services.pricing", "from shopapi.services.pricing import cart_subtotal"),
)


def _collect_fail(files: dict[str, str], test_path: str, family: str, rng: random.Random) -> _Fail | None:
    """A test module that cannot be imported: a missing module, or a function that is gone."""
    if family == "module":
        missing, line = rng.choice([m for m in _MISSING_MODULES if m[0].replace(".", "/") + ".py" not in files])
        return _Fail("collect", test_path, message=f"ModuleNotFoundError: No module named '{missing}'", call=line)
    imports = [
        (m, n) for m, n in _imported(files[test_path]) if m.startswith("shopapi/") and m not in HUBS and m in files
    ]
    imports = [(m, n) for m, n in imports if n in _functions(files[m])]
    if not imports:
        return None
    module, name = rng.choice(imports)
    dotted = module[:-3].replace("/", ".")
    line = next(ln for ln in files[test_path].split("\n") if ln.startswith(f"from {dotted} import"))
    message = f"ImportError: cannot import name '{name}' from '{dotted}' ({REPO}/{module})"
    return _Fail("collect", test_path, message=message, call=line)


def _pytest_fail(files: dict[str, str], test_path: str, family: str, rng: random.Random) -> _Fail | None:
    """A failure of ``family`` in ``test_path`` that fits the code, or None when none fits."""
    if family == "assert":
        return _assert_fail(files, test_path, rng)
    if family in ("type-kw", "type-missing"):
        return _call_fail(files, test_path, family, rng)
    if family in ("import", "module"):
        return _collect_fail(files, test_path, family, rng)
    if family == "integrity":
        calls = [c for c in _calls(files, test_path) if c[3] in ("make_product", "make_user")]
        if not calls:
            return None
        test, call, module, name = rng.choice(calls)
        table, column = ("products", "sku") if name == "make_product" else ("users", "email")
        message = f"sqlalchemy.exc.IntegrityError: (sqlite3.IntegrityError) UNIQUE constraint failed: {table}.{column}"
        detail = (
            f"[SQL: INSERT INTO {table} ({column}, created_at) VALUES (?, ?)]",
            "[parameters: ('x{n}', '2024-11-14 09:{n}:{n}.{n}')]",
            "(Background on this error at: https://sqlalche.me/e/20/gkpj)",
        )
        return _Fail("pytest", test_path, test, message, call, (module, name, "session.flush()"), detail)
    return _deep_fail(files, test_path, family, rng)


PYTEST_FAMILIES = (
    "assert",
    "type-op",
    "attr-none",
    "name",
    "zero",
    "key",
    "type-kw",
    "type-missing",
    "import",
    "module",
    "integrity",
)


def _fill(text: str, rng: random.Random) -> str:
    while "{n}" in text:
        text = text.replace("{n}", str(rng.randrange(10, 99999)), 1)
    while "{addr}" in text:
        text = text.replace("{addr}", _addr(rng), 1)
    return text


# ---------------------------------------------------------------- pytest output

_FIXTURES = {
    "db_session": "<sqlalchemy.orm.session.Session object at {addr}>",
    "session": "<sqlalchemy.orm.session.Session object at {addr}>",
    "client": "<starlette.testclient.TestClient object at {addr}>",
    "monkeypatch": "<_pytest.monkeypatch.MonkeyPatch object at {addr}>",
    "cart": "<shopapi.models.cart.Cart object at {addr}>",
    "coupon": "<shopapi.models.coupon.Coupon object at {addr}>",
    "payment": "<shopapi.models.payment.Payment object at {addr}>",
    "order": "<Order {n} pending>",
    "product": "<Product SKU-{n} 19.99 EUR>",
    "user": "<User {n} user{n}@example.com>",
    "data": "UserCreate(email='ann@example.com', full_name='', password='correct horse battery')",
}


def _arg_repr(name: str, rng: random.Random) -> str:
    if name in _FIXTURES:
        return _fill(_FIXTURES[name], rng)
    if name.endswith(("_id", "quantity", "count", "days", "limit", "offset")):
        return str(rng.randrange(1, 60))
    if name in ("subtotal", "amount", "price", "discount"):
        return f"Decimal('{rng.randrange(5, 200)}.{rng.randrange(100):02d}')"
    return "None"


def _exception_name(message: str) -> str:
    head = message.split(":", 1)[0]
    return "AssertionError" if head.startswith("assert ") else head.rsplit(".", 1)[-1]


def _source_lines(body: list[str], upto: int) -> list[str]:
    return [(">   " if i == upto else "    ") + line for i, line in enumerate(body[: upto + 1])]


def _pytest_block(fail: _Fail, files: dict[str, str], rng: random.Random) -> str:
    start, body = _function_lines(files[fail.target], fail.test)
    upto = next((i for i, line in enumerate(body) if line.strip() == fail.call), len(body) - 1)
    params = re.findall(r"(\w+):", body[0].split("(", 1)[1].rsplit(")", 1)[0])
    out = [_bar(fail.test, "_"), ""]
    out += [f"{name} = {_arg_repr(name, rng)}" for name in params] + ([""] if params else [])
    out += _source_lines(body, upto)
    errors = [f"E       {_fill(line, rng)}" for line in (fail.message, *fail.detail)]
    if fail.frame is None:
        return "\n".join([*out, *errors, "", f"{fail.target}:{start + upto}: {_exception_name(fail.message)}"])
    module, function, source = fail.frame
    out += ["", f"{fail.target}:{start + upto}: ", "_ " * 40, ""]
    mstart, mbody = _function_lines(files[module], function)
    where = next((i for i, line in enumerate(mbody) if line.strip() == source), len(mbody) - 1)
    signature = " ".join(mbody[:3]).split("->")[0]
    args = [a for a in re.findall(r"(\w+)(?::|\s*=)", signature.split("(", 1)[1]) if a not in ("self",)]
    out += [f"{name} = {_arg_repr(name, rng)}" for name in dict.fromkeys(args)] + ([""] if args else [])
    out += _source_lines(mbody, where) + errors
    return "\n".join([*out, "", f"{module}:{mstart + where}: {_exception_name(fail.message)}"])


def _pytest_targets(files: dict[str, str], target: str) -> list[tuple[str, list[str]]]:
    if not target:
        paths = sorted(p for p in files if re.fullmatch(r"tests/test_\w+\.py", p))
        return [(p, _test_names(files[p])) for p in paths]
    path, _, only = target.partition("::")
    names = _test_names(files[path])
    return [(path, [only] if only else names)]


def _pad(left: str, right: str) -> str:
    return left + " " * max(1, 80 - len(left) - len(right)) + right


def _progress(selected: list[tuple[str, list[str]]], failed: str, style: str) -> list[str]:
    total = sum(len(names) for _, names in selected)
    done, out, quiet = 0, [], ""
    for path, names in selected:
        marks = "".join("F" if f"{path}::{n}" == failed else "." for n in names)
        for name in names if style == "v" else []:
            done += 1
            status = "FAILED" if f"{path}::{name}" == failed else "PASSED"
            out.append(_pad(f"{path}::{name} {status}", f"[{100 * done // total:3d}%]"))
        if style == "full":
            done += len(names)
            out.append(_pad(f"{path} {marks}", f"[{100 * done // total:3d}%]"))
        quiet += marks
    if style == "q":
        for i in range(0, len(quiet), 72):
            out.append(_pad(quiet[i : i + 72], f"[{100 * min(i + 72, total) // total:3d}%]"))
    return out


def _pytest_header(count: int, style: str) -> list[str]:
    lines = [_bar("test session starts"), "platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0"]
    if style == "v":
        lines[1] += f" -- {REPO}/.venv/bin/python3"
        lines.append("cachedir: .pytest_cache")
    lines += [f"rootdir: {REPO}", "configfile: pyproject.toml", "plugins: anyio-4.6.2, cov-5.0.0"]
    return [*lines, f"collected {count} item{'s' if count != 1 else ''}", ""]


def _summary(parts: list[str], seconds: float, style: str) -> str:
    text = f"{', '.join(parts)} in {seconds:.2f}s"
    return text if style == "q" else _bar(text)


_WARNINGS = [
    (
        "{repo}/.venv/lib/python3.11/site-packages/sqlalchemy/sql/schema.py:3596: DeprecationWarning: "
        "datetime.datetime.utcnow() is deprecated and scheduled for removal in a future version. Use timezone-aware "
        "objects to represent datetimes in UTC: datetime.datetime.now(datetime.UTC).",
        "    return util.wrap_callable(lambda ctx: fn(), fn)  # type: ignore",
    ),
    (
        "{repo}/shopapi/main.py:25: DeprecationWarning: \n        on_event is deprecated, use lifespan event "
        "handlers instead.\n\n        Read more about it in the\n        [FastAPI docs for Lifespan Events]"
        "(https://fastapi.tiangolo.com/advanced/events/).",
        '    @app.on_event("shutdown")',
    ),
    (
        "{repo}/.venv/lib/python3.11/site-packages/pydantic/_internal/_config.py:291: PydanticDeprecatedSince20: "
        "Support for class-based `config` is deprecated, use ConfigDict instead. Deprecated in Pydantic V2.0 to be "
        "removed in V3.0. See Pydantic V2 Migration Guide at https://errors.pydantic.dev/2.9/migration/",
        "    warnings.warn(DEPRECATION_MESSAGE, DeprecationWarning)",
    ),
]


def _warnings_section(selected: list[tuple[str, list[str]]], size: int, rng: random.Random) -> tuple[list[str], int]:
    out, count = [_bar("warnings summary")], 0
    nodes = [f"{path}::{name}" for path, names in selected for name in names]
    while sum(len(line) + 1 for line in out) < size:
        node = nodes[count % len(nodes)]
        message, source = _WARNINGS[0] if count < len(nodes) else rng.choice(_WARNINGS)
        out += [node, "  " + message.replace("{repo}", REPO), source, ""]
        count += 1
    return [*out, "-- Docs: https://docs.pytest.org/en/stable/how-to/capture-warnings.html"], count


def _pytest_output(
    files: dict[str, str], target: str, fail: _Fail | None, style: str, rng: random.Random, log_size: int = 0
) -> tuple[str, int]:
    """The text pytest prints for ``target`` ("" for the whole suite) and its exit code."""
    selected = _pytest_targets(files, target)
    total = sum(len(names) for _, names in selected)
    seconds = rng.uniform(0.2, 0.5) + total * rng.uniform(0.008, 0.03)
    if fail is not None and fail.tool == "collect":
        return _collect_output(files, fail, style, seconds, rng), 2
    failed = f"{fail.target}::{fail.test}" if fail else ""
    out = [] if style == "q" else _pytest_header(total, style)
    out += _progress(selected, failed, style)
    parts = [f"{total - (1 if fail else 0)} passed"]
    if fail is not None:
        out += ["", _bar("FAILURES"), _pytest_block(fail, files, rng)]
    if log_size:
        section, count = _warnings_section(selected, log_size, rng)
        out += ["", *section]
        parts.append(f"{count} warnings")
    if fail is not None:
        summary = _fill(fail.message, rng)
        out += [_bar("short test summary info"), f"FAILED {failed} - {summary}"]
        parts.insert(0, "1 failed")
        if total == 1:
            parts.pop(1)
    out.append(_summary(parts, seconds, style))
    return "\n".join(out) + "\n", (1 if fail else 0)


def _collect_output(files: dict[str, str], fail: _Fail, style: str, seconds: float, rng: random.Random) -> str:
    out = [] if style == "q" else [*_pytest_header(0, style)[:-2], "collected 0 items / 1 error", ""]
    importing = fail.call or next(ln for ln in files[fail.target].split("\n") if ln.startswith("from shopapi"))
    lines = files[fail.target].split("\n")
    number = _line_no(files[fail.target], importing) or max(
        i for i, ln in enumerate(lines, 1) if ln.startswith("from ")
    )
    out += [
        _bar("ERRORS"),
        _bar(f"ERROR collecting {fail.target}", "_"),
        f"ImportError while importing test module '{REPO}/{fail.target}'.",
        "Hint: make sure your test modules/packages have valid Python names.",
        "Traceback:",
        "/usr/lib/python3.11/importlib/__init__.py:126: in import_module",
        "    return _bootstrap._gcd_import(name[level:], package, level)",
        f"{fail.target}:{number}: in <module>",
        f"    {importing}",
        f"E   {fail.message}",
        _bar("short test summary info"),
        f"ERROR {fail.target}",
        _bar("Interrupted: 1 error during collection", "!"),
        _summary(["1 error"], seconds, style),
    ]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- other tools

_MYPY_RULES = [
    (r"round_money\((?!amount)", 'Argument 1 to "round_money" has incompatible type "float"; expected "Decimal"'),
    (r"= session\.get\(", 'Incompatible types in assignment (expression has type "Product | None", variable has type'),
    (r"\.quantize\(", 'Item "None" of "Decimal | None" has no attribute "quantize"  [union-attr]'),
    (r"\bsum\(", 'Argument 1 to "sum" has incompatible type "Generator[Decimal | None, None, None]"; expected'),
    (r"return list\(session\.scalars", 'Returning Any from function declared to return "list[Any]"  [no-any-return]'),
    (r"^def \w+\(.*\) -> \w+:$", "Missing return statement  [return]"),
]
_MYPY_TAILS = {
    'Argument 1 to "round_money"': "  [arg-type]",
    "Incompatible types in assignment": ' "Product")  [assignment]',
    'Argument 1 to "sum"': ' "Iterable[Decimal]"  [arg-type]',
}


def _mypy_fail(files: dict[str, str], rng: random.Random, modules: list[str]) -> _Fail | None:
    options = []
    for module in modules:
        for line in files[module].split("\n"):
            for pattern, message in _MYPY_RULES:
                if re.search(pattern, line):
                    tail = next((t for head, t in _MYPY_TAILS.items() if message.startswith(head)), "")
                    options.append(_Fail("mypy", module, message=message + tail, call=line))
    return rng.choice(options) if options else None


def _mypy_output(files: dict[str, str], fail: _Fail | None) -> tuple[str, int]:
    checked = sum(1 for p in files if p.startswith("shopapi/") and p.endswith(".py"))
    if fail is None:
        return f"Success: no issues found in {checked} source files\n", 0
    line = _line_no(files[fail.target], fail.call) or 1
    found = f"Found 1 error in 1 file (checked {checked} source files)"
    return f"{fail.target}:{line}: error: {fail.message}\n{found}\n", 1


_TSC_RULES = [
    (r"coupon\?\.percent\)", "error TS18048: 'coupon.percent' is possibly 'undefined'.", ""),
    (r"line\.priceCents", "error TS2339: Property 'priceCents' does not exist on type 'CartItem'.", ""),
    (r"formatPrice\(", "error TS2345: Argument of type 'string' is not assignable to parameter of type 'number'.", ""),
    (
        r"discount = coupon",
        "error TS2322: Type 'number | undefined' is not assignable to type 'number'.",
        "  Type 'undefined' is not assignable to type 'number'.",
    ),
    (r"\(sum, line\)", "error TS7006: Parameter 'line' implicitly has an 'any' type.", ""),
]


def _tsc_fail(files: dict[str, str], rng: random.Random) -> _Fail:
    options = []
    for path in ("frontend/src/cart.ts", "frontend/src/format.ts"):
        for line in files[path].split("\n"):
            for pattern, message, detail in _TSC_RULES:
                match = re.search(pattern, line)
                if match:
                    options.append(_Fail("tsc", path, message=message, call=line, detail=(detail,) if detail else ()))
    return rng.choice(options)


def _tsc_output(files: dict[str, str], fail: _Fail | None, strip: str) -> tuple[str, int]:
    if fail is None:
        return "", 0
    line = _line_no(files[fail.target], fail.call)
    column = len(fail.call) - len(fail.call.lstrip()) + 1
    shown = fail.target.removeprefix(strip)
    text = f"{shown}({line},{column}): {fail.message}\n" + "".join(d + "\n" for d in fail.detail)
    return text + f"\n\nFound 1 error in {shown}:{line}\n\n", 2


# (correct text, the broken text the user left, error code, message, label)
_CARGO_BREAKS = [
    (
        "round_half_even(cents * (10_000 + basis_points) / 1_000)",
        "round_half_even(cents * (10_000 + basis_points) / 1_000) as f64",
        "E0308",
        "mismatched types",
        "expected `i64`, found `f64`",
    ),
    (
        "(cents - discount).max(0)",
        "(cents - discount).clamp_min(0)",
        "E0599",
        "no method named `clamp_min` found for type `i64` in the current scope",
        "method not found in `i64`",
    ),
    ("_ => whole + (whole & 1),", "_ => whole + (whole & 1 == 1),", "E0308", "mismatched types", "expected `i64`"),
    (
        'let frac = format!("{:0<2}", frac);',
        'let frac = format!("{:0<2}", fraction);',
        "E0425",
        "cannot find value `fraction` in this scope",
        "not found in this scope",
    ),
]
# (correct text, a logic bug) for failing Rust tests
_CARGO_BUGS = [
    ("0..=4 => whole,", "0..=5 => whole,"),
    ("(cents - discount).max(0)", "(cents - discount)"),
    ("* 100 + frac[..2]", "* 10 + frac[..2]"),
    ("(10_000 + basis_points) / 1_000", "(10_000 + basis_points) / 1_001"),
]


def _cargo_fail(files: dict[str, str], rng: random.Random) -> tuple[_Fail, tuple[str, str]]:
    """A failing ``cargo test`` and the change to native/src/lib.rs (correct, broken) that causes it."""
    text = files["native/src/lib.rs"]
    if rng.random() < 0.4:
        good, bad = rng.choice([(g, b) for g, b in _CARGO_BUGS if text.count(g) == 1])
        test = rng.choice(_CARGO_TESTS)
        left, right = rng.choice([("Some(125)", "Some(1250)"), ("14", "12"), ("11899", "11900"), ("-200", "0")])
        fail = _Fail("cargo-test", "native/src/lib.rs", test, "assertion `left == right` failed", detail=(left, right))
        return fail, (good, bad)
    good, bad, code, message, label = rng.choice([c for c in _CARGO_BREAKS if text.count(c[0]) == 1])
    line = next(ln for ln in text.split("\n") if good in ln).replace(good, bad)
    return _Fail("cargo", "native/src/lib.rs", code, message, line, detail=(label,)), (good, bad)


def _cargo_output(files: dict[str, str], fail: _Fail | None, rng: random.Random) -> tuple[str, str, int]:
    """(stdout, stderr, exit code) of ``cargo test`` in the native crate."""
    compiled = f"   Compiling pricing v0.1.0 ({REPO}/native)\n"
    if fail is not None and fail.tool == "cargo":
        line = _line_no(files[fail.target], fail.call)
        gutter = " " * len(str(line))
        column = len(fail.call) - len(fail.call.lstrip()) + 1
        marker = " " * (column - 1) + "^" * max(3, min(24, len(fail.call.strip()) // 2))
        err = (
            f"{compiled}error[{fail.test}]: {fail.message}\n{gutter}--> src/lib.rs:{line}:{column}\n{gutter} |\n"
            f"{line} | {fail.call}\n{gutter} | {marker} {fail.detail[0]}\n\n"
            f"For more information about this error, try `rustc --explain {fail.test}`.\n"
            f"error: could not compile `pricing` (lib test) due to 1 previous error\n"
        )
        return "", err, 101
    seconds = rng.uniform(0.4, 3.2)
    err = (
        f"{compiled}    Finished `test` profile [unoptimized + debuginfo] target(s) in {seconds:.2f}s\n"
        f"     Running unittests src/lib.rs (target/debug/deps/pricing-{rng.getrandbits(64):016x})\n"
    )
    names = sorted("tests::" + n for n in re.findall(r"#\[test\]\s*\n\s*fn (\w+)", files["native/src/lib.rs"]))
    failing = fail.test if fail is not None else ""
    out = [f"\nrunning {len(names)} tests"] + [f"test {n} ... {'FAILED' if n == failing else 'ok'}" for n in names]
    if fail is not None and failing:
        left, right = fail.detail
        line = _line_no(files["native/src/lib.rs"], f"fn {failing.split('::')[-1]}()") + 1
        out += ["", "failures:", "", f"---- {failing} stdout ----"]
        out += [f"thread '{failing}' panicked at src/lib.rs:{line}:9:", fail.message]
        out += [f"  left: {left}", f" right: {right}", "note: run with `RUST_BACKTRACE=1` environment variable"]
        out += ["", "", "failures:", f"    {failing}", ""]
        out.append(f"test result: FAILED. {len(names) - 1} passed; 1 failed; 0 ignored; 0 measured; 0 filtered out")
        return "\n".join(out) + "\n", err + "error: test failed, to rerun pass `--lib`\n", 101
    out += ["", f"test result: ok. {len(names)} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished"]
    return "\n".join(out) + " in 0.00s\n\n", err + "   Doc-tests pricing\n", 0


# (test, message, file, correct text, the change that makes the test fail)
_VITEST_FAILS = [
    (
        "applies a percentage coupon",
        "AssertionError: expected 8100 to be 9000 // Object.is equality",
        "frontend/src/cart.ts",
        "(subtotal * coupon.percent) / 100",
        "(subtotal * coupon.percent * 1.9) / 100",
    ),
    (
        "applies a fixed coupon",
        "AssertionError: expected 10000 to be 9500 // Object.is equality",
        "frontend/src/cart.ts",
        "coupon?.amountOffCents !== undefined",
        "coupon?.amountOffCents === undefined",
    ),
    (
        "never goes below zero",
        "AssertionError: expected -200 to be +0 // Object.is equality",
        "frontend/src/cart.ts",
        "discount = Math.min(discount, subtotal);",
        "discount = Math.max(discount, 0);",
    ),
    (
        "formats euros",
        "AssertionError: expected '1 items, €12.50' to be '1 items, 12,50 €' // Object.is equality",
        "frontend/src/format.ts",
        'locale = "de-DE"',
        'locale = "en-IE"',
    ),
]


def _vitest_fail(files: dict[str, str], rng: random.Random) -> tuple[_Fail, str, tuple[str, str]]:
    """A failing vitest case, the file holding its cause and that change (correct, broken)."""
    case, message, path, good, bad = rng.choice([v for v in _VITEST_FAILS if files[v[2]].count(v[3]) == 1])
    return _Fail("vitest", "frontend/src/cart.test.ts", case, message), path, (good, bad)


def _vitest_output(files: dict[str, str], fail: _Fail | None, rng: random.Random, npm: bool) -> tuple[str, str, int]:
    text = files["frontend/src/cart.test.ts"]
    total = len(re.findall(r'^\s*it\("', text, re.M))
    ms = rng.randrange(6, 40)
    head = "\n> shop-admin@0.3.0 test\n> vitest run\n\n" if npm else ""
    out = [head, f" RUN  v2.1.4 {REPO}/frontend", ""]
    clock = f"{rng.randrange(8, 19):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
    timing = f"{rng.randrange(250, 900)}ms (transform {rng.randrange(30, 90)}ms, setup 0ms, collect {ms * 4}ms"
    timing += f", tests {ms}ms, environment 0ms, prepare {rng.randrange(60, 140)}ms)"
    if fail is None:
        out += [f" ✓ src/cart.test.ts ({total} tests) {ms}ms", "", " Test Files  1 passed (1)"]
        out += [f"      Tests  {total} passed ({total})", f"   Start at  {clock}", f"   Duration  {timing}", ""]
        return "\n".join(out) + "\n", "", 0
    group = next(g for g, c in _VITEST_CASES if c == fail.test)
    line = _line_no(text, f'it("{fail.test}"')
    lines = text.split("\n")
    expect_at = next((i for i in range(line, min(line + 6, len(lines))) if "expect(" in lines[i]), line)
    snippet = [f"    {n + 1:>3}|{lines[n]}" for n in range(max(0, expect_at - 2), min(len(lines), expect_at + 2))]
    out += [f" ❯ src/cart.test.ts ({total} tests | 1 failed) {ms}ms", f"   × {group} > {fail.test} {ms // 2}ms"]
    out += [f"     → {fail.message.split(': ', 1)[1]}", "", "⎯" * 22 + " Failed Tests 1 " + "⎯" * 22, ""]
    out += [f" FAIL  src/cart.test.ts > {group} > {fail.test}", fail.message, ""]
    out += [f" ❯ src/cart.test.ts:{expect_at + 1}:{lines[expect_at].find('expect') + 1}", *snippet, ""]
    out += [
        "⎯" * 55 + "[1/1]⎯",
        "",
        " Test Files  1 failed (1)",
        f"      Tests  1 failed | {total - 1} passed ({total})",
    ]
    out += [f"   Start at  {clock}", f"   Duration  {timing}", ""]
    err = ""
    if npm:
        err = "npm error Lifecycle script `test` failed with error:\nnpm error code 1\n"
        err += f"npm error path {REPO}/frontend\nnpm error workspace shop-admin@0.3.0\n"
        err += f"npm error location {REPO}/frontend\nnpm error command failed\nnpm error command sh -c vitest run\n"
    return "\n".join(out) + "\n", err, 1


def _ruff_findings(files: dict[str, str], paths: list[str]) -> list[str]:
    """Ruff's findings (full output format) for imports ``paths`` do not use."""
    found = []
    for path in paths:
        text = files[path]
        for i, line in enumerate(text.split("\n")):
            match = re.match(r"(?:from ([\w.]+) )?import ([\w, ]+)$", line)
            if not match or (match.group(1) or "").startswith("__"):
                continue
            for name in (n.strip() for n in match.group(2).split(",")):
                used = name.split(" as ")[-1].split(".")[0]
                if len(re.findall(rf"\b{re.escape(used)}\b", text)) == 1:
                    full = f"{match.group(1)}.{name}" if match.group(1) else name
                    column = line.rindex(name) + 1
                    found.append(
                        f"{path}:{i + 1}:{column}: F401 [*] `{full}` imported but unused\n  |\n"
                        f"{i + 1:>2} | {line}\n   | {' ' * (column - 1)}{'^' * len(name)} F401\n  |\n"
                        f"  = help: Remove unused import: `{full}`\n"
                    )
    return found


# ---------------------------------------------------------------- git

_COMMITS = [
    "Merge pull request #212 from shop/fix/coupon-expiry",
    "coupons: reject expired codes at lookup time",
    "Bump ruff to 0.7.2",
    "orders: compute tax on the discounted subtotal",
    "api: paginate /orders",
    "carts: expire carts after cart_ttl_hours",
    "payments: move provider call behind _provider_client",
    "README: document the workers",
    "tests: factories for coupons and carts",
    "catalog: search by sku as well as name",
    "Add email worker",
    "Initial import of the shop backend",
]


def _sha(text: str, n: int = 7) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:n]


def _git_log(count: int, path: str = "") -> str:
    commits = [c for c in _COMMITS if not path or int(_sha(c + path), 16) % 3 != 0]
    return "".join(f"{_sha(c)} {c}\n" for c in commits[:count])


def _diff(path: str, before: str | None, after: str) -> list[str]:
    old = [] if before is None else _lines(before)
    head = [f"diff --git a/{path} b/{path}"]
    if before is None:
        head += ["new file mode 100644", f"index 0000000..{_sha(after)}", "--- /dev/null", f"+++ b/{path}"]
    else:
        head += [f"index {_sha(before)}..{_sha(after)} 100644", f"--- a/{path}", f"+++ b/{path}"]
    body = list(difflib.unified_diff(old, _lines(after), lineterm="", n=3))[2:]
    return head + body


# ---------------------------------------------------------------- the session builder

_CLAUDE_TESTS = (
    "python -m pytest {t} -q",
    "pytest {t}",
    "python -m pytest {t}",
    "uv run pytest {t} -q",
    "pytest {t} -q",
)
_CODEX_TESTS = ("pytest -q {t}", "python -m pytest -q {t}", "pytest {t}", "pytest -q {t}")
_BRANCHES = ("main", "main", "fix/coupon-rounding", "feature/order-invoices", "chore/deps", "refactor/services")
_GERUNDS = {
    "Run": "Running",
    "Add": "Adding",
    "Fix": "Fixing",
    "Write": "Writing",
    "Update": "Updating",
    "Read": "Reading",
    "Check": "Checking",
    "Rename": "Renaming",
    "Move": "Moving",
    "Bump": "Bumping",
    "Find": "Finding",
    "Extract": "Extracting",
    "Investigate": "Investigating",
    "Make": "Making",
    "Replace": "Replacing",
    "Document": "Documenting",
}
_DESCRIPTIONS = [
    (r"pytest.*tests/test_(\w+)", "Run the {0} tests"),
    (r"pytest", "Run the test suite"),
    (r"git status", "Show working tree status"),
    (r"git diff --stat", "Summarize changes"),
    (r"git diff", "Show the diff"),
    (r"git log", "Show recent commits"),
    (r"git commit", "Commit the changes"),
    (r"ruff format", "Format with ruff"),
    (r"ruff check", "Lint with ruff"),
    (r"mypy", "Type-check the package"),
    (r"npm .*test|vitest", "Run the frontend tests"),
    (r"tsc", "Type-check the frontend"),
    (r"cargo", "Run the Rust tests"),
    (r"pip install|uv lock|uv sync|uv pip", "Install the updated dependencies"),
    (r"^(cat|tail|head|less) .*log", "Show the log"),
    (r"^ls", "List files"),
    (r"^(rg|grep)", "Search the code"),
    (r"^python", "Run a quick check"),
]


def _describe(command: str) -> str:
    plain = command.split("&& ", 1)[-1]
    for pattern, text in _DESCRIPTIONS:
        match = re.search(pattern, plain)
        if match:
            return text.format(*[(g or "").replace("_", " ") for g in match.groups()])
    return "Run " + plain.split()[0]


class _Builder:
    """Accumulates one session's hook events, keeping a working copy of the repository."""

    def __init__(self, host: str, rng: random.Random) -> None:
        self.host = host
        self.rng = rng
        self.base = repo_files()
        self.files = dict(self.base)
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.failed: set[int] = set()
        self.session_id = _uuid(rng)
        self.turn_id = _uuid(rng)
        self.turns = 0
        self.cwd = REPO
        self.branch = rng.choice(_BRANCHES)
        self.test_template = rng.choice(_CLAUDE_TESTS if host == "claude" else _CODEX_TESTS)
        self.read_style = rng.choice(("sed", "sed", "cat", "nl"))
        self.grep_style = rng.choice(("rg", "rg", "rg", "grep"))
        self.todos: list[dict[str, str]] = []
        self.big_log = False
        self.mypy_command = rng.choice(("mypy shopapi", "mypy shopapi", "mypy .", "uv run mypy shopapi"))
        self.read_paths: set[str] = set()

    # -- raw events

    def _common(self, event: str) -> dict[str, Any]:
        if self.host == "claude":
            transcript = f"/home/u/.claude/projects/p/{self.session_id}.jsonl"
            return {
                "session_id": self.session_id,
                "transcript_path": transcript,
                "cwd": self.cwd,
                "permission_mode": "default",
                "hook_event_name": event,
            }
        return {
            "session_id": self.session_id,
            "turn_id": self.turn_id,
            "transcript_path": None,
            "cwd": self.cwd,
            "hook_event_name": event,
            "model": "gpt-5-codex",
            "permission_mode": "default",
        }

    def _add(self, kind: str, payload: dict[str, Any]) -> int:
        self.events.append((kind, payload))
        return len(self.events) - 1

    def start(self) -> None:
        self._add("session-start", {**self._common("SessionStart"), "source": "startup"})

    def prompt(self, text: str) -> None:
        if self.host == "codex" and self.turns:
            self.turn_id = _uuid(self.rng)
        self.turns += 1
        self._add("user-prompt", {**self._common("UserPromptSubmit"), "prompt": text})

    def stop(self, message: str) -> None:
        payload = {**self._common("Stop"), "stop_hook_active": False, "last_assistant_message": message}
        self._add("stop", payload)

    def end(self) -> None:
        payload = self._common("SessionEnd")
        if self.host == "claude":
            payload["reason"] = "other"
        self._add("session-end", payload)

    def _tool_id(self) -> str:
        return "toolu_01" + _token(self.rng, 22) if self.host == "claude" else "call_" + _token(self.rng, 24)

    def _tool(self, name: str, tool_input: dict[str, Any], response: Any, ms: int) -> int:
        payload = {
            **self._common("PostToolUse"),
            "tool_name": name,
            "tool_input": tool_input,
            "tool_response": response,
            "tool_use_id": self._tool_id(),
        }
        if self.host == "claude":
            payload["duration_ms"] = ms
        return self._add("post-tool", payload)

    def repeat(self, index: int) -> int:
        """The call at ``index`` made again (same input and output: nothing changed since)."""
        kind, old = self.events[index]
        assert kind == "post-tool"
        response = json.loads(json.dumps(old["tool_response"]))
        return self._tool(old["tool_name"], dict(old["tool_input"]), response, self.rng.randrange(3, 120))

    def tool_count(self) -> int:
        return sum(1 for kind, _ in self.events if kind.startswith("post-tool"))

    # -- paths

    def abs(self, path: str) -> str:
        return f"{REPO}/{path}" if path not in ("", ".") else REPO

    def rel(self, path: str) -> str:
        here = self.cwd[len(REPO) :].lstrip("/")
        if not here:
            return path
        return path[len(here) + 1 :] if path.startswith(here + "/") else "../" + path

    # -- shell

    def _in_dir(self, command: str, where: str) -> tuple[str, str]:
        """``command`` run in repository folder ``where``, and the working directory afterwards."""
        here = self.cwd[len(REPO) :].lstrip("/")
        if where == here:
            return command, self.cwd
        if self.host == "codex":
            return (f"cd {where} && " if where and not here else "cd .. && ") + command, self.cwd
        if where and not here:
            return f"cd {where} && {command}", f"{REPO}/{where}"
        target = f"{REPO}/{where}" if where else REPO
        return f"cd {target} && {command}", target

    def sh(
        self,
        command: str,
        out: str = "",
        code: int = 0,
        *,
        err: str = "",
        desc: str = "",
        where: str = "",
        ms: int | None = None,
        err_first: bool = False,
    ) -> int:
        command, after = self._in_dir(command, where)
        ms = ms if ms is not None else self.rng.randrange(40, 900)
        if self.host == "codex":
            index = self._tool("Bash", {"command": command}, (err + out) if err_first else (out + err), ms)
            if code:
                self.failed.add(index)
            return index
        tool_input = {"command": command, "description": desc or _describe(command)}
        if code == 0:
            response = {"stdout": out.rstrip("\n"), "stderr": err.rstrip("\n"), "interrupted": False}
            response.update({"isImage": False, "noOutputExpected": False})
            index = self._tool("Bash", tool_input, response, ms)
        else:
            parts = [f"Exit code {code}"] + [p.rstrip("\n") for p in (err, out) if p]
            payload = {**self._common("PostToolUseFailure"), "tool_name": "Bash", "tool_input": tool_input}
            payload.update({"tool_use_id": self._tool_id(), "error": "\n".join(parts), "is_interrupt": False})
            payload["duration_ms"] = ms
            index = self._add("post-tool-failure", payload)
            self.failed.add(index)
        self.cwd = after
        return index

    # -- reading and searching

    def read(self, path: str, around: int = 0) -> int:
        self.read_paths.add(path)
        text = self.files[path]
        if self.host == "claude":
            count = len(_lines(text))
            file = {"filePath": self.abs(path), "content": text, "numLines": count, "startLine": 1, "totalLines": count}
            return self._tool(
                "Read", {"file_path": self.abs(path)}, {"type": "text", "file": file}, self.rng.randrange(2, 40)
            )
        lines = _lines(text)
        style = "nl" if around else self.read_style
        if style == "cat":
            return self.sh(f"cat {self.rel(path)}", text, ms=self.rng.randrange(5, 40))
        if style == "sed":
            limit = self.rng.choice((120, 160, 200, 220, 260, 400))
            shown = "".join(line + "\n" for line in lines[:limit])
            return self.sh(f"sed -n '1,{limit}p' {self.rel(path)}", shown, ms=self.rng.randrange(5, 40))
        first = max(1, around - self.rng.randrange(5, 25)) if around else 1
        last = first + self.rng.choice((60, 80, 120, 160)) - 1
        shown = "".join(f"{n:>6}\t{lines[n - 1]}\n" for n in range(first, min(last, len(lines)) + 1))
        return self.sh(f"nl -ba {self.rel(path)} | sed -n '{first},{last}p'", shown, ms=self.rng.randrange(5, 40))

    def _hits(self, pattern: str, where: str) -> list[tuple[str, int, str]]:
        regex = re.compile(pattern)
        roots = where.split()
        hits = []
        for path in sorted(self.files):
            if any(root in (".", path) or path.startswith(root.rstrip("/") + "/") for root in roots):
                for n, line in enumerate(_lines(self.files[path]), 1):
                    if regex.search(line):
                        hits.append((path, n, line))
        return hits

    def grep(self, pattern: str, where: str = "shopapi tests", files_only: bool = False) -> tuple[int, list[str]]:
        """Search the working copy; returns the event index and the files that matched."""
        root = where if len(where.split()) == 1 or self.host == "codex" else "."
        hits = self._hits(pattern, root)
        paths = list(dict.fromkeys(path for path, _, _ in hits))
        ms = self.rng.randrange(20, 400)
        if self.host == "claude":
            mode = "files_with_matches" if files_only else "content"
            content = "" if files_only else "\n".join(f"{self.abs(p)}:{n}:{line}" for p, n, line in hits)
            filenames = [self.abs(p) for p in paths] if files_only else []
            response = {"mode": mode, "numFiles": len(paths), "filenames": filenames, "content": content}
            tool_input = {"pattern": pattern, "path": self.abs(root), "output_mode": mode}
            return self._tool("Grep", tool_input, response, ms), paths
        places = " ".join(self.rel(w) if w != "." else "." for w in where.split())
        if files_only:
            command = (
                f"rg -l {_quote(pattern)} {places}"
                if self.grep_style == "rg"
                else f"grep -rl {_quote(pattern)} {places}"
            )
            out = "".join(self.rel(p) + "\n" for p in paths)
        else:
            command = (
                f"rg -n {_quote(pattern)} {places}"
                if self.grep_style == "rg"
                else f"grep -rn {_quote(pattern)} {places}"
            )
            out = "".join(f"{self.rel(p)}:{n}:{line}\n" for p, n, line in hits)
        return self.sh(command, out, ms=ms), paths

    def glob(self, pattern: str) -> tuple[int, list[str]]:
        regex = re.compile(re.escape(pattern).replace(r"\*\*/", "(?:.*/)?").replace(r"\*", "[^/]*"))
        paths = [p for p in sorted(self.files) if regex.fullmatch(p)]
        if self.host == "claude":
            response = {"filenames": [self.abs(p) for p in paths], "numFiles": len(paths)}
            return self._tool("Glob", {"pattern": pattern}, response, self.rng.randrange(15, 160)), paths
        folder = pattern.rsplit("/", 1)[0] if "/" in pattern and "*" not in pattern.rsplit("/", 1)[0] else ""
        if folder and self.rng.random() < 0.6:
            names = sorted({p[len(folder) + 1 :].split("/")[0] for p in self.files if p.startswith(folder + "/")})
            return self.sh(
                f"ls {self.rel(folder)}", "".join(n + "\n" for n in names), ms=self.rng.randrange(4, 30)
            ), paths
        command = f"rg --files -g '{pattern.rsplit('/', 1)[-1]}' {self.rel(folder) if folder else ''}".rstrip()
        return self.sh(command, "".join(self.rel(p) + "\n" for p in paths), ms=self.rng.randrange(10, 60)), paths

    # -- editing

    def _patch(self, path: str, before: str | None, after: str) -> str:
        rel = self.rel(path)
        if before is None:
            added = "".join(f"+{line}\n" for line in _lines(after))
            return f"*** Begin Patch\n*** Add File: {rel}\n{added}*** End Patch\n"
        a, b = before.split("\n"), after.split("\n")
        out = ["*** Begin Patch", f"*** Update File: {rel}"]
        for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(2):
            out.append("@@")
            for tag, i1, i2, j1, j2 in group:
                if tag == "equal":
                    out += [" " + line for line in a[i1:i2]]
                else:
                    out += ["-" + line for line in a[i1:i2]] + ["+" + line for line in b[j1:j2]]
        return "\n".join([*out, "*** End Patch"]) + "\n"

    def _codex_edit(self, path: str, before: str | None, after: str) -> int:
        letter = "A" if before is None else "M"
        response = f"Success. Updated the following files:\n{letter} {self.rel(path)}\n"
        return self._tool("apply_patch", {"command": self._patch(path, before, after)}, response, 0)

    def _seen(self, path: str) -> None:
        """Claude Code refuses to edit a file it has not read in this session."""
        if self.host == "claude" and path in self.files and path not in self.read_paths:
            self.read(path)

    def edit(self, path: str, old: str, new: str) -> int:
        self._seen(path)
        before = self.files[path]
        assert before.count(old) == 1, (path, old)
        after = before.replace(old, new, 1)
        self.files[path] = after
        if self.host == "codex":
            return self._codex_edit(path, before, after)
        tool_input = {"file_path": self.abs(path), "old_string": old, "new_string": new}
        response: dict[str, Any] = {"filePath": self.abs(path), "oldString": old, "newString": new}
        response.update({"structuredPatch": [], "userModified": False})
        return self._tool("Edit", tool_input, response, self.rng.randrange(8, 90))

    def multi_edit(self, path: str, pairs: list[tuple[str, str]]) -> int:
        self._seen(path)
        before = after = self.files[path]
        for old, new in pairs:
            assert after.count(old) == 1, (path, old)
            after = after.replace(old, new, 1)
        self.files[path] = after
        if self.host == "codex":
            return self._codex_edit(path, before, after)
        edits = [{"old_string": old, "new_string": new} for old, new in pairs]
        response = {"filePath": self.abs(path), "edits": edits, "structuredPatch": [], "userModified": False}
        return self._tool(
            "MultiEdit", {"file_path": self.abs(path), "edits": edits}, response, self.rng.randrange(10, 90)
        )

    def write(self, path: str, content: str) -> int:
        self._seen(path)
        self.read_paths.add(path)
        before = self.files.get(path)
        self.files[path] = content
        if self.host == "codex":
            return self._codex_edit(path, before, content)
        kind = "create" if before is None else "update"
        response = {"type": kind, "filePath": self.abs(path), "content": content}
        return self._tool(
            "Write", {"file_path": self.abs(path), "content": content}, response, self.rng.randrange(8, 60)
        )

    def todo(self, items: list[str], done: int) -> None:
        """Claude's TodoWrite: the first ``done`` items completed, the next in progress."""
        if self.host != "claude":
            return
        new = []
        for i, item in enumerate(items):
            status = "completed" if i < done else "in_progress" if i == done else "pending"
            verb, _, rest = item.partition(" ")
            new.append({"content": item, "status": status, "activeForm": f"{_GERUNDS.get(verb, verb)} {rest}"})
        response = {"oldTodos": self.todos, "newTodos": new}
        self._tool("TodoWrite", {"todos": new}, response, self.rng.randrange(1, 6))
        self.todos = new

    # -- tools

    def test_command(self, target: str) -> str:
        return " ".join(self.test_template.format(t=target).split())

    def pytest(self, target: str = "", fail: _Fail | None = None, *, command: str = "", log_size: int = 0) -> int:
        command = command or self.test_command(target)
        style = "q" if " -q" in command else "v" if " -v" in command else "full"
        out, code = _pytest_output(self.files, target, fail, style, self.rng, log_size)
        ms = 900 + len(out) // 3 + self.rng.randrange(300, 2500)
        return self.sh(command, out, code, ms=ms)

    def mypy(self, fail: _Fail | None = None, command: str = "") -> int:
        out, code = _mypy_output(self.files, fail)
        return self.sh(command or self.mypy_command, out, code, ms=self.rng.randrange(800, 9000))

    def ruff(self, command: str = "ruff check .") -> int:
        modified, added = self.changed()
        findings = _ruff_findings(self.files, [p for p in modified + added if p.endswith(".py")])
        if not findings:
            return self.sh(command, "All checks passed!\n", ms=self.rng.randrange(30, 200))
        fixable = sum("[*]" in f for f in findings)
        tail = f"Found {len(findings)} error{'s' if len(findings) > 1 else ''}.\n"
        tail += f"[*] {fixable} fixable with the `--fix` option.\n" if fixable else ""
        return self.sh(command, "\n".join(findings) + tail, 1, ms=self.rng.randrange(30, 200))

    def npm_test(self, fail: _Fail | None = None, fixed: bool = False) -> int:
        here = self.cwd.endswith("/frontend")
        if fixed or (self.host == "codex" and not here and self.rng.random() < 0.5):
            out, err, code = _vitest_output(self.files, fail, self.rng, True)
            return self.sh("npm --prefix frontend test", out, code, err=err, ms=self.rng.randrange(900, 4000))
        npm = self.rng.random() < 0.7
        out, err, code = _vitest_output(self.files, fail, self.rng, npm)
        command = "npm test" if npm else "npx vitest run"
        return self.sh(command, out, code, err=err, where="frontend", ms=self.rng.randrange(900, 4000))

    def tsc(self, fail: _Fail | None = None, fixed: bool = False) -> int:
        if fixed:
            out, code = _tsc_output(self.files, fail, "")
            return self.sh("npx tsc --noEmit -p frontend", out, code, ms=self.rng.randrange(1500, 5000))
        out, code = _tsc_output(self.files, fail, "frontend/")
        return self.sh("npx tsc --noEmit", out, code, where="frontend", ms=self.rng.randrange(1500, 5000))

    def cargo(self, fail: _Fail | None = None, fixed: bool = False) -> int:
        out, err, code = _cargo_output(self.files, fail, self.rng)
        ms = self.rng.randrange(2000, 20000)
        if fixed:
            command = "cargo test --manifest-path native/Cargo.toml"
            return self.sh(command, out, code, err=err, ms=ms, err_first=True)
        return self.sh("cargo test", out, code, err=err, where="native", ms=ms, err_first=True)

    # -- git

    def changed(self) -> tuple[list[str], list[str]]:
        modified = [p for p in sorted(self.files) if p in self.base and self.files[p] != self.base[p]]
        return modified, [p for p in sorted(self.files) if p not in self.base]

    def git_status(self, short: bool = False) -> int:
        modified, added = self.changed()
        if short:
            out = f"## {self.branch}...origin/{self.branch}\n" + "".join(f" M {p}\n" for p in modified)
            return self.sh("git status -sb", out + "".join(f"?? {p}\n" for p in added), ms=self.rng.randrange(15, 80))
        out = f"On branch {self.branch}\nYour branch is up to date with 'origin/{self.branch}'.\n\n"
        if modified:
            out += 'Changes not staged for commit:\n  (use "git add <file>..." to update what will be committed)\n'
            out += '  (use "git restore <file>..." to discard changes in working directory)\n'
            out += "".join(f"\tmodified:   {p}\n" for p in modified) + "\n"
        if added:
            out += 'Untracked files:\n  (use "git add <file>..." to include in what will be committed)\n'
            out += "".join(f"\t{p}\n" for p in added) + "\n"
        if modified:
            out += 'no changes added to commit (use "git add" and/or "git commit -a")\n'
        elif added:
            out += 'nothing added to commit but untracked files present (use "git add" to track)\n'
        else:
            out += "nothing to commit, working tree clean\n"
        return self.sh("git status", out, ms=self.rng.randrange(15, 80))

    def git_diff(self, path: str = "", stat: bool = False) -> int:
        modified, _ = self.changed()
        paths = [p for p in modified if not path or p == path]
        if not stat:
            out = "".join(line + "\n" for p in paths for line in _diff(p, self.base[p], self.files[p]))
            return self.sh(f"git diff {path}".strip(), out, ms=self.rng.randrange(15, 80))
        rows, plus, minus = [], 0, 0
        for p in paths:
            body = _diff(p, self.base[p], self.files[p])[4:]
            added = sum(1 for x in body if x.startswith("+"))
            removed = sum(1 for x in body if x.startswith("-"))
            plus, minus = plus + added, minus + removed
            rows.append(f" {p} | {added + removed} {'+' * min(added, 30)}{'-' * min(removed, 30)}")
        tail = f" {len(paths)} file{'s' if len(paths) != 1 else ''} changed, {plus} insertions(+), {minus} deletions(-)"
        return self.sh(
            "git diff --stat", "\n".join([*rows, tail]) + "\n" if paths else "", ms=self.rng.randrange(15, 80)
        )

    def git_log(self, path: str = "") -> int:
        count = self.rng.choice((5, 8, 10))
        return self.sh(f"git log --oneline -{count} {('-- ' + path) if path else ''}".strip(), _git_log(count, path))

    def commit(self, message: str) -> int:
        modified, added = self.changed()
        lines = [x for p in modified for x in _diff(p, self.base[p], self.files[p])[4:]]
        lines += [x for p in added for x in _diff(p, None, self.files[p])[5:]]
        plus = sum(1 for x in lines if x.startswith("+"))
        minus = sum(1 for x in lines if x.startswith("-"))
        count = len(modified) + len(added)
        out = f"[{self.branch} {_sha(message + str(plus))}] {message}\n"
        out += f" {count} file{'s' if count != 1 else ''} changed, {plus} insertions(+), {minus} deletions(-)\n"
        out += "".join(f" create mode 100644 {p}\n" for p in added)
        self.base = dict(self.files)
        return self.sh(f'git add -A && git commit -m "{message}"', out, ms=self.rng.randrange(40, 300))


# ---------------------------------------------------------------- edits

_NUMERIC = ("quantity", "rating", "limit", "amount", "price", "days", "cents", "subtotal", "count", "offset")
_TEXTUAL = ("code", "email", "query", "text", "token", "name", "link", "password", "currency")
_OBJECTS = ("order", "cart", "coupon", "product", "user", "payment", "moment", "start")
_VERBS = {
    "get": "Return",
    "list": "List",
    "create": "Create",
    "add": "Add",
    "remove": "Remove",
    "find": "Look up",
    "validate": "Check",
    "cancel": "Cancel",
    "mark": "Mark",
    "reserve": "Reserve",
    "release": "Release",
    "send": "Send",
    "render": "Render",
    "capture": "Capture",
    "refund": "Refund",
    "expire": "Expire",
    "update": "Update",
    "search": "Search",
    "to": "Convert to",
    "from": "Convert from",
    "format": "Format",
    "round": "Round",
    "clamp": "Clamp",
    "estimate": "Estimate",
    "authenticate": "Authenticate",
    "deactivate": "Deactivate",
}


_DOCS = {
    "run_migrations_online": "Run the migrations against the configured database.",
    "get_db": "A database session per request, committed when the request succeeds.",
    "current_user": "The user the bearer token belongs to; 401 without a valid token.",
    "admin_user": "The current user, if it is an admin; 403 otherwise.",
    "page_params": "Offset and limit from the query string, clamped to the allowed range.",
    "health": "Liveness probe.",
    "ready": "Readiness probe: 503 while the database is unreachable.",
    "place": "Turn the user's cart into an order.",
    "cancel": "Cancel one of the user's orders.",
    "pay": "Pay for an order with a provider token.",
    "search": "Search active products by name or SKU.",
    "create": "Create a product (admins only).",
    "set_price": "Change a product's price (admins only).",
    "register": "Create an account.",
    "login": "Exchange e-mail and password for an access token.",
    "me": "The current user.",
    "configure_logging": "Configure logging for the API and the workers.",
    "hash_password": "Hash a password with PBKDF2 and a random salt.",
    "verify_password": "Check a password against a stored PBKDF2 hash.",
    "create_access_token": "Sign an access token for a user.",
    "decode_access_token": "The user id in a valid, unexpired token, else None.",
    "create_app": "Build the FastAPI application.",
    "get_or_create_cart": "The user's cart, created on first use.",
    "add_item": "Add a product to the cart, merging quantities of the same product.",
    "remove_item": "Remove a product from the cart.",
    "cart_subtotal": "The cart's value at current prices, rounded to cents.",
    "cart_summary": "Subtotal and shipping of a cart.",
    "expire_stale_carts": "Delete carts untouched for longer than the cart TTL; returns how many.",
    "get_product": "An active product by id, or NotFoundError.",
    "list_products": "Active products, ordered by id, one page at a time.",
    "create_product": "Create a product with a slug made from its name.",
    "update_price": "Set a new price for a product.",
    "search_products": "Active products whose name or SKU contains the query.",
    "find_coupon": "A valid coupon by code (case-insensitive).",
    "validate_coupon": "Raise ConflictError if the coupon has expired or is used up.",
    "discount_for": "The discount a coupon gives on a subtotal, never more than the subtotal.",
    "render_template": "Fill in one of the e-mail templates.",
    "send_order_confirmation": "E-mail the order confirmation to the customer.",
    "send_password_reset": "E-mail a password reset link.",
    "reserve_stock": "Reserve stock for an order, or raise OutOfStockError.",
    "release_stock": "Give reserved stock back (never below zero).",
    "low_stock_products": "Active products at or below the low-stock threshold.",
    "get_order": "An order by id, or NotFoundError.",
    "order_total": "Total of an order including shipping and tax.",
    "create_order": "Create an order from a cart, reserving stock and applying a coupon.",
    "mark_paid": "Mark a pending order as paid.",
    "cancel_order": "Cancel an order and release its stock.",
    "capture_payment": "Charge the order total through the payment provider.",
    "refund_payment": "Refund all or part of a captured payment.",
    "add_review": "Add a review with a rating from 1 to 5.",
    "list_reviews": "Newest reviews of a product first.",
    "average_rating": "Average rating of a product, to one decimal.",
    "shipping_cost": "Shipping for an order of this subtotal (free above the threshold).",
    "estimate_delivery": "Expected delivery date, counting business days only.",
    "get_user": "A user by id, or NotFoundError.",
    "get_user_by_email": "A user by e-mail address (case-insensitive), or None.",
    "create_user": "Register a user; the e-mail address must be unused.",
    "authenticate": "The active user with these credentials, or None.",
    "deactivate_user": "Disable a user's account.",
    "utcnow": "The current time in UTC, without tzinfo (as stored).",
    "to_local": "A stored UTC time in the shop's time zone.",
    "add_business_days": "The date ``days`` business days after ``start``.",
    "round_money": "Round to cents, half up.",
    "to_cents": "An amount in integer cents.",
    "from_cents": "Integer cents as an amount.",
    "format_price": "An amount formatted with its currency symbol.",
    "clamp_limit": "A page size within the allowed range.",
    "page_links": "Links to the next and previous pages.",
    "slugify": "A URL slug for a name (ASCII, lowercase, dashes).",
    "run_once": "Send confirmations for one batch of paid orders; returns how many were sent.",
}
_ROUTE_DOCS = {
    "show": "One resource by id.",
    "index": "One page of resources.",
    "add": "Add an item.",
    "remove": "Remove an item.",
    "main": "Entry point.",
}


def _doc_for(name: str) -> str:
    if name in _DOCS:
        return _DOCS[name]
    if name in _ROUTE_DOCS:
        return _ROUTE_DOCS[name]
    words = name.split("_")
    if words[0] in _VERBS:
        return f"{_VERBS[words[0]]} the {' '.join(words[1:]) or 'value'}."
    return f"The {' '.join(words)}."


def _guard(name: str, params: list[str], has_logger: bool) -> str:
    for p in params:
        if p in _NUMERIC:
            return f'    if {p} < 0:\n        raise ValueError("{p} must not be negative")\n'
        if p in _TEXTUAL:
            return f"    {p} = {p}.strip()\n"
        if p in _OBJECTS:
            return f'    if {p} is None:\n        raise ValueError("{p} is required")\n'
    if has_logger and params:
        return f'    logger.debug("{name}(%r)", {params[-1]})\n'
    return ""


def _python_edits(text: str) -> list[tuple[str, str]]:
    lines = text.split("\n")
    options = []
    for name in _functions(text):
        _, body = _function_lines(text, name)
        head = next(i for i, line in enumerate(body) if line.rstrip().endswith(":"))
        if head + 1 >= len(body):
            continue
        old = "\n".join(body[: head + 2])
        first = body[head + 1].strip()
        params = [p for p in re.findall(r"(\w+):", " ".join(body[: head + 1]).split("->")[0]) if p != "session"]
        guard = _guard(name, params, "logger = " in text)
        if guard and not first.startswith('"""'):
            options.append((old, "\n".join(body[: head + 1]) + "\n" + guard + body[head + 1]))
        if not first.startswith('"""'):
            doc = f'    """{_doc_for(name)}"""'
            options.append((old, "\n".join(body[: head + 1]) + "\n" + doc + "\n" + body[head + 1]))
    flips = {"<=": "<", ">=": ">", "<": "<=", ">": ">="}
    for line in lines:
        match = re.search(r" (<=|>=|<|>) ", line)
        if match and lines.count(line) == 1 and not line.strip().startswith(("#", '"', "def ")):
            options.append((line, line[: match.start(1)] + flips[match.group(1)] + line[match.end(1) :]))
        match = re.match(r"(\s+return )(.*[+*/-].*)$", line)
        if match and "round_money" in text and "round_money" not in line and lines.count(line) == 1:
            options.append((line, f"{match.group(1)}round_money({match.group(2)})"))
    return [(o, n) for o, n in options if text.count(o) == 1]


def _other_edits(path: str, text: str) -> list[tuple[str, str]]:
    lines = [line for line in text.split("\n") if line.strip() and text.count(line) == 1]
    options = []
    for line in lines:
        if path.endswith(".ts"):
            match = re.match(r"(\s*(?:const|let) \w+) = ", line)
            if match and any(word in line for word in ("subtotal", "value", "discount", "count")):
                options.append((line, line.replace(match.group(1), match.group(1) + ": number", 1)))
            for old, new in (("Math.round(", "Math.floor("), (" <= ", " < "), ("=== 0", "<= 0"), (", 0)", ", 0) | 0")):
                if old in line:
                    options.append((line, line.replace(old, new, 1)))
            if line.strip().startswith("return ") and "?? " not in line and line.endswith(";"):
                options.append((line, line[:-1] + " ?? 0;" if "Cents" in line else line))
        elif path.endswith(".rs"):
            match = re.match(r"(\s*let \w+) = ", line)
            if match and ":" not in line.split("=")[0] and "(" not in line.split("=")[0]:
                options.append((line, line.replace(match.group(1), match.group(1) + ": i64", 1)))
            for old, new in (
                ("0..=4", "0..=5"),
                (".max(0)", ".max(0_i64)"),
                ("* 100 +", "* 100_i64 +"),
                ("1_000", "1000"),
            ):
                if old in line:
                    options.append((line, line.replace(old, new, 1)))
    return [(o, n) for o, n in options if o != n]


def _edit_options(path: str, text: str, avoid: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """Small plausible edits of ``text``: (old, new) with ``old`` unique and not overlapping any ``avoid`` text."""
    options = _python_edits(text) if path.endswith(".py") else _other_edits(path, text)
    return [(o, n) for o, n in options if not any(o in a or a in o for a in avoid if a)]


def _near(text: str, names: list[str]) -> tuple[str, ...]:
    """The source of the functions ``names`` that ``text`` defines."""
    return tuple("\n".join(_function_lines(text, n)[1]) for n in names if n in _functions(text))


def _edit_kind(old: str, new: str) -> str:
    if '"""' in new and '"""' not in old:
        return "doc"
    return "guard" if new.count("\n") > old.count("\n") else "change"


_PURPOSES = {"fix": ("guard", "change"), "doc": ("doc",), "sweep": ("doc", "guard"), "any": ("doc", "guard", "change")}


def _choices(
    path: str, text: str, avoid: tuple[str, ...] = (), near: tuple[str, ...] = (), purpose: str = "fix"
) -> list[tuple[str, str]]:
    """The edits ``_tweak`` may pick: of the kinds ``purpose`` allows, inside ``near`` when any are."""
    options = [(o, n) for o, n in _edit_options(path, text, avoid) if _edit_kind(o, n) in _PURPOSES[purpose]]
    close = [(o, n) for o, n in options if any(o.split("\n")[0] in source for source in near)]
    return close or options


def _tweak(
    b: _Builder, path: str, avoid: tuple[str, ...] = (), near: tuple[str, ...] = (), purpose: str = "fix"
) -> int | None:
    """One small edit of ``path`` (Claude sometimes batches two with MultiEdit); None when none fits."""
    options = _choices(path, b.files[path], avoid, near, purpose)
    if not options:
        return None
    old, new = b.rng.choice(options)
    if b.host == "claude" and b.rng.random() < 0.12:
        rest = [(o, n) for o, n in options if o not in old and old not in o and o not in new and new not in o]
        if rest:
            return b.multi_edit(path, [(old, new), b.rng.choice(rest)])
    return b.edit(path, old, new)


def _append(b: _Builder, path: str, code: str) -> int:
    """Add ``code`` at the end of ``path`` (Edit anchored on the last lines, or a patch)."""
    text = b.files[path]
    tail = "\n".join(_lines(text)[-3:]) + ("\n" if text.endswith("\n") else "")
    if text.count(tail) != 1:
        return b.write(path, text + "\n\n" + code)
    return b.edit(path, tail, tail + "\n\n" + code.rstrip("\n") + "\n")


def _add_import(b: _Builder, path: str, module: str, name: str) -> int | None:
    text = b.files[path]
    match = re.search(rf"^from {re.escape(module)} import ([^\n(]+)$", text, re.M)
    if match:
        names = sorted({*[n.strip() for n in match.group(1).split(",")], name})
        return b.edit(path, match.group(0), f"from {module} import {', '.join(names)}")
    local = module.startswith(("shopapi", "tests"))
    pattern = (
        r"^from (?:shopapi|tests)[\w.]* import [^\n(]+$"
        if local
        else r"^from (?!shopapi|tests|__)[\w.]+ import [^\n(]+$"
    )
    anchors = re.findall(pattern, text, re.M)
    if not anchors:
        return None
    anchor = anchors[-1]
    return b.edit(path, anchor, f"{anchor}\nfrom {module} import {name}")


def _rename_in(b: _Builder, path: str, old: str, new: str) -> int:
    """Rename the identifier ``old`` in one file: Edits per line, a MultiEdit, a Write, or one patch."""
    text = b.files[path]
    renamed = re.sub(rf"\b{old}\b", new, text)
    lines = [line for line in dict.fromkeys(text.split("\n")) if re.search(rf"\b{old}\b", line)]
    if b.host == "codex" or any(text.count(line) != 1 for line in lines):
        return b.write(path, renamed)
    pairs = [(line, re.sub(rf"\b{old}\b", new, line)) for line in lines]
    if len(pairs) > 1 and b.rng.random() < 0.5:
        return b.multi_edit(path, pairs)
    index = -1
    for pair in pairs:
        index = b.edit(path, *pair)
    return index


def _plant(b: _Builder, path: str, good: str, bad: str) -> tuple[str, str]:
    """The user's own uncommitted change (no tool event): ``good`` became ``bad``."""
    b.files[path] = b.files[path].replace(good, bad, 1)
    return good, bad


def _plant_bug(b: _Builder, path: str, names: list[str], avoid: tuple[str, ...]) -> tuple[str, str] | None:
    """A small change the user made near the functions ``names`` (a flipped comparison, a dropped rounding)."""
    text = b.files[path]
    options = _choices(path, text, avoid, _near(text, names))
    options = [(o, n) for o, n in options if _edit_kind(o, n) == "change"] or options
    options = [(o, n) for o, n in options if text.replace(o, n, 1).count(n) == 1]
    if not options:
        return None
    return _plant(b, path, *b.rng.choice(options))


_KEYWORD_RENAMES = {"coupon_code": "code", "express": "is_express", "price": "unit_price", "stock": "quantity"}


def _signature_change(b: _Builder, fail: _Fail) -> tuple[str, str] | None:
    """(correct, broken) signature line behind an unexpected-keyword or missing-argument TypeError."""
    name = re.findall(r"TypeError: (\w+)\(\)", fail.message)[0]
    text = b.files[fail.origin]
    _, body = _function_lines(text, name)
    keyword = re.findall(r"unexpected keyword argument '(\w+)'", fail.message)
    if keyword:
        line = next(ln for ln in body[:8] if re.search(rf"(^\s*|, ){keyword[0]}:", ln))
        bad = re.sub(rf"\b{keyword[0]}:", _KEYWORD_RENAMES.get(keyword[0], "new_" + keyword[0]) + ":", line, count=1)
    else:
        arg = re.findall(r"argument: '(\w+)'", fail.message)[0]
        line = body[0]
        bad = line.replace(") ->", f", {arg}: str) ->", 1)
    return (line, bad) if text.count(line) == 1 and line != bad else None


def _import_removal(b: _Builder, path: str, name: str) -> tuple[str, str] | None:
    """(correct, broken) import lines behind ``NameError: name 'name' is not defined`` in ``path``."""
    lines = b.files[path].split("\n")
    for i, line in enumerate(lines[:-1]):
        match = re.match(r"(from [\w.]+ import )([\w, ]+)$", line)
        names = [n.strip() for n in match.group(2).split(",")] if match else []
        if match and name in names:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip()), i + 1)
            after = "\n".join(lines[i + 1 : end + 1])
            rest = [n for n in names if n != name]
            return line + "\n" + after, (match.group(1) + ", ".join(rest) + "\n" if rest else "") + after
    return None


def _plant_for(b: _Builder, fail: _Fail, module: str, names: list[str]) -> tuple[str, tuple[str, str]] | None:
    """The user's change behind a pytest failure, applied: where it is and (correct, broken) text, or None."""
    change: tuple[str, str] | None = None
    where = module
    if fail.tool == "collect":
        match = re.search(r"cannot import name '(\w+)' from '[\w.]+' \(\{repo\}/([\w/.]+)\)", fail.message)
        if match and b.files[match.group(2)].count(f"def {match.group(1)}(") == 1:
            renamed = dict(_RENAMES).get(match.group(1), match.group(1) + "_impl")
            where, change = match.group(2), (f"def {match.group(1)}(", f"def {renamed}(")
        elif "No module named" in fail.message:
            anchor = next(ln for ln in b.files[fail.target].split("\n") if ln.startswith("from shopapi"))
            where, change = fail.target, (anchor, fail.call + "\n" + anchor)
    elif fail.origin:
        where, change = fail.origin, _signature_change(b, fail)
    elif fail.frame and fail.message.startswith("NameError"):
        where, change = fail.frame[0], _import_removal(b, fail.frame[0], fail.message.split("'")[1])
    elif fail.frame and fail.frame[0] == "tests/factories.py":
        text = b.files[fail.frame[0]]
        for good, bad in (('f"SKU-{n:05d}"', '"SKU-00001"'), ('f"user{next(_ids)}@example.com"', '"user@example.com"')):
            if fail.frame[1] in ("make_product", "make_user") and text.count(good) == 1:
                where, change = fail.frame[0], (good, bad)
                break
    else:
        return (
            (module, plant) if (plant := _plant_bug(b, module, names, (fail.frame[2],) if fail.frame else ())) else None
        )
    text = b.files[where]
    if not change or text.count(change[0]) != 1 or text.replace(*change, 1).count(change[1]) != 1:
        return None
    return where, _plant(b, where, *change)


def _revert(b: _Builder, path: str, plant: tuple[str, str]) -> int:
    """The fix: undo the user's change, anchored on its whole line when the fragment is not unique."""
    good, bad = plant
    text = b.files[path]
    if text.count(bad) == 1:
        return b.edit(path, bad, good)
    line = next(ln for ln in text.split("\n") if bad in ln)
    return b.edit(path, line, line.replace(bad, good, 1))


# ---------------------------------------------------------------- what the work is about


@dataclass(frozen=True)
class _Area:
    name: str
    module: str
    test: str
    related: tuple[str, ...]
    noun: str


_AREAS = (
    _Area(
        "orders",
        "shopapi/services/orders.py",
        "tests/test_orders.py",
        (
            "shopapi/models/order.py",
            "shopapi/api/routes/orders.py",
            "shopapi/services/coupons.py",
            "tests/factories.py",
        ),
        "order",
    ),
    _Area(
        "catalog",
        "shopapi/services/catalog.py",
        "tests/test_catalog.py",
        ("shopapi/models/product.py", "shopapi/api/routes/products.py", "shopapi/schemas/product.py"),
        "product",
    ),
    _Area(
        "carts",
        "shopapi/services/carts.py",
        "tests/test_carts.py",
        ("shopapi/models/cart.py", "shopapi/api/routes/carts.py", "shopapi/services/shipping.py"),
        "cart",
    ),
    _Area(
        "payments",
        "shopapi/services/payments.py",
        "tests/test_payments.py",
        ("shopapi/models/payment.py", "shopapi/api/routes/payments.py", "shopapi/utils/money.py"),
        "payment",
    ),
    _Area(
        "coupons",
        "shopapi/services/coupons.py",
        "tests/test_coupons.py",
        ("shopapi/models/coupon.py", "shopapi/services/orders.py", "shopapi/utils/dates.py"),
        "coupon",
    ),
    _Area(
        "inventory",
        "shopapi/services/inventory.py",
        "tests/test_inventory.py",
        ("shopapi/models/product.py", "shopapi/services/orders.py"),
        "stock",
    ),
    _Area(
        "users",
        "shopapi/services/users.py",
        "tests/test_users.py",
        ("shopapi/models/user.py", "shopapi/core/security.py", "shopapi/api/routes/users.py", "shopapi/api/deps.py"),
        "user",
    ),
    _Area(
        "shipping",
        "shopapi/services/shipping.py",
        "tests/test_shipping.py",
        ("shopapi/utils/dates.py", "shopapi/services/carts.py"),
        "shipping",
    ),
    _Area(
        "money",
        "shopapi/utils/money.py",
        "tests/test_money.py",
        ("shopapi/services/payments.py", "shopapi/services/emails.py"),
        "price",
    ),
    _Area(
        "pagination",
        "shopapi/utils/pagination.py",
        "tests/test_pagination.py",
        ("shopapi/api/deps.py", "shopapi/api/routes/products.py"),
        "page",
    ),
    _Area(
        "products api",
        "shopapi/api/routes/products.py",
        "tests/test_api_products.py",
        ("shopapi/services/catalog.py", "shopapi/api/deps.py", "shopapi/schemas/product.py"),
        "product",
    ),
    _Area(
        "orders api",
        "shopapi/api/routes/orders.py",
        "tests/test_api_orders.py",
        ("shopapi/services/orders.py", "shopapi/api/deps.py", "shopapi/schemas/order.py"),
        "order",
    ),
)
_AREA = {area.name: area for area in _AREAS}


@dataclass(frozen=True)
class _Feature:
    area: str
    ask: str
    name: str
    code: str
    imports: tuple[tuple[str, str], ...]
    test: str
    route: str = ""
    route_code: str = ""


_FEATURES = (
    _Feature(
        "orders",
        "add a way to list a user's orders by status (service function, endpoint, test)",
        "orders_with_status",
        "def orders_with_status(session: Session, user_id: int, status: str) -> list[Order]:\n"
        "    if status not in STATUSES:\n"
        '        raise ValueError(f"unknown status {status!r}")\n'
        "    stmt = select(Order).where(Order.user_id == user_id, Order.status == status).order_by(Order.id.desc())\n"
        "    return list(session.scalars(stmt))\n",
        (("shopapi.models.order", "STATUSES"), ("sqlalchemy", "select")),
        "def test_orders_with_status_filters(db_session: Session) -> None:\n"
        '    order = make_order(db_session, status="paid")\n'
        '    assert orders_with_status(db_session, order.user_id, "paid") == [order]\n',
        "shopapi/api/routes/orders.py",
        '@router.get("/status/{status}", response_model=list[OrderOut])\n'
        "def by_status(\n    status: str, db: Session = Depends(get_db), user: User = Depends(current_user)\n"
        ") -> list[Order]:\n"
        "    return orders_with_status(db, user.id, status)\n",
    ),
    _Feature(
        "orders",
        "add GET /orders/{id}/invoice that returns the totals breakdown (subtotal, discount, shipping, tax, total)",
        "invoice_lines",
        "def invoice_lines(order: Order) -> list[tuple[str, Decimal]]:\n"
        '    """The amounts printed on an invoice, in order."""\n'
        '    lines = [("Subtotal", order.subtotal)]\n'
        "    if order.discount:\n"
        '        lines.append(("Discount", -order.discount))\n'
        '    lines += [("Shipping", order.shipping), ("Tax", order.tax), ("Total", order.total)]\n'
        "    return lines\n",
        (),
        "def test_invoice_lines_end_with_total(db_session: Session) -> None:\n"
        '    order = make_order(db_session, subtotal=Decimal("20.00"))\n'
        '    assert invoice_lines(order)[-1] == ("Total", order.total)\n',
        "shopapi/api/routes/orders.py",
        '@router.get("/{order_id}/invoice")\n'
        "def invoice(\n    order_id: int, db: Session = Depends(get_db), user: User = Depends(current_user)\n"
        ") -> list[dict[str, str]]:\n"
        "    order = show(order_id, db, user)\n"
        '    return [{"label": label, "amount": str(amount)} for label, amount in invoice_lines(order)]\n',
    ),
    _Feature(
        "catalog",
        "make products reachable by slug (GET /products/by-slug/{slug})",
        "get_product_by_slug",
        "def get_product_by_slug(session: Session, slug: str) -> Product:\n"
        "    product = session.scalars(select(Product).where(Product.slug == slug, Product.is_active)).first()\n"
        "    if product is None:\n"
        '        raise NotFoundError(f"product {slug!r} not found")\n'
        "    return product\n",
        (),
        "def test_get_product_by_slug(db_session: Session) -> None:\n"
        '    product = create_product(db_session, ProductIn(sku="SL-1", name="Green Tea", price=Decimal("4.50")))\n'
        '    assert get_product_by_slug(db_session, "green-tea").id == product.id\n',
        "shopapi/api/routes/products.py",
        '@router.get("/by-slug/{slug}", response_model=ProductOut)\n'
        "def show_by_slug(slug: str, db: Session = Depends(get_db)) -> ProductOut:\n"
        "    return ProductOut.model_validate(get_product_by_slug(db, slug))\n",
    ),
    _Feature(
        "catalog",
        "add a bulk sale function that cuts the price of a list of products by a percentage",
        "apply_sale",
        "def apply_sale(session: Session, product_ids: list[int], percent: int) -> list[Product]:\n"
        "    if not 0 < percent < 100:\n"
        '        raise ValueError("percent must be between 1 and 99")\n'
        "    products = [get_product(session, product_id) for product_id in product_ids]\n"
        "    for product in products:\n"
        '        product.price = (product.price * (100 - percent) / 100).quantize(Decimal("0.01"))\n'
        '    logger.info("sale of %s%% on %s products", percent, len(products))\n'
        "    return products\n",
        (),
        "def test_apply_sale_reduces_prices(db_session: Session) -> None:\n"
        '    product = make_product(db_session, price=Decimal("10.00"))\n'
        "    apply_sale(db_session, [product.id], 25)\n"
        '    assert product.price == Decimal("7.50")\n',
    ),
    _Feature(
        "carts",
        "add a clear-cart endpoint (DELETE /cart) that empties the current user's cart",
        "clear_cart",
        "def clear_cart(session: Session, cart: Cart) -> None:\n"
        "    cart.items.clear()\n"
        "    cart.updated_at = datetime.utcnow()\n",
        (),
        "def test_clear_cart_removes_all_items(db_session: Session) -> None:\n"
        "    cart = get_or_create_cart(db_session, make_user(db_session).id)\n"
        "    add_item(db_session, cart, make_product(db_session).id, 2)\n"
        "    clear_cart(db_session, cart)\n"
        "    assert cart.items == []\n",
        "shopapi/api/routes/carts.py",
        '@router.delete("", response_model=CartOut)\n'
        "def clear(db: Session = Depends(get_db), user: User = Depends(current_user)) -> CartOut:\n"
        "    clear_cart(db, get_or_create_cart(db, user.id))\n"
        "    return _out(db, user)\n",
    ),
    _Feature(
        "users",
        "let users change their password (check the old one first)",
        "change_password",
        "def change_password(session: Session, user: User, old: str, new: str) -> None:\n"
        "    if not verify_password(old, user.password_hash):\n"
        '        raise ConflictError("current password is wrong")\n'
        "    if len(new) < 10:\n"
        '        raise ValueError("password must have at least 10 characters")\n'
        "    user.password_hash = hash_password(new)\n"
        '    logger.info("password changed for user %s", user.id)\n',
        (),
        "def test_change_password(db_session: Session) -> None:\n"
        '    user = make_user(db_session, email="pw@example.com", password="old-password-1")\n'
        '    change_password(db_session, user, "old-password-1", "new-password-22")\n'
        '    assert authenticate(db_session, "pw@example.com", "new-password-22") is not None\n',
    ),
    _Feature(
        "coupons",
        "add a redeem function that bumps a coupon's used_count when an order is paid",
        "redeem_coupon",
        "def redeem_coupon(session: Session, code: str) -> Coupon:\n"
        "    coupon = find_coupon(session, code)\n"
        "    coupon.used_count += 1\n"
        "    return coupon\n",
        (),
        "def test_redeem_coupon_counts_uses(db_session: Session) -> None:\n"
        '    make_coupon(db_session, code="TWICE", percent=5, max_uses=2)\n'
        '    redeem_coupon(db_session, "TWICE")\n'
        '    assert redeem_coupon(db_session, "twice").used_count == 2\n',
    ),
    _Feature(
        "inventory",
        "add a restock function so the warehouse script can add stock to a product",
        "restock",
        "def restock(session: Session, product: Product, quantity: int) -> Product:\n"
        "    if quantity < 1:\n"
        '        raise ValueError("quantity must be at least 1")\n'
        "    product.stock += quantity\n"
        '    logger.info("restocked %s by %s (now %s)", product.sku, quantity, product.stock)\n'
        "    return product\n",
        (),
        "def test_restock_adds_to_stock(db_session: Session) -> None:\n"
        "    product = make_product(db_session, stock=1)\n"
        "    assert restock(db_session, product, 4).stock == 5\n",
    ),
    _Feature(
        "shipping",
        "add a shipping quote with both options (price and delivery date) for the checkout page",
        "shipping_quote",
        "def shipping_quote(subtotal: Decimal, ordered_on: date) -> dict[str, dict[str, object]]:\n"
        "    standard = {'cost': shipping_cost(subtotal), 'arrives': estimate_delivery(ordered_on)}\n"
        "    express_cost = shipping_cost(subtotal, express=True)\n"
        "    express = {'cost': express_cost, 'arrives': estimate_delivery(ordered_on, express=True)}\n"
        "    return {'standard': standard, 'express': express}\n",
        (),
        "def test_shipping_quote_has_both_options() -> None:\n"
        '    quote = shipping_quote(Decimal("20.00"), date(2024, 11, 15))\n'
        '    assert set(quote) == {"standard", "express"}\n',
    ),
    _Feature(
        "money",
        "add a helper that splits an amount into n installments that add up exactly to the total",
        "split_installments",
        "def split_installments(amount: Decimal, parts: int) -> list[Decimal]:\n"
        '    """Split ``amount`` into ``parts`` payments; the first ones carry the extra cents."""\n'
        "    if parts < 1:\n"
        '        raise ValueError("parts must be at least 1")\n'
        "    cents, remainder = divmod(to_cents(amount), parts)\n"
        "    return [from_cents(cents + (1 if i < remainder else 0)) for i in range(parts)]\n",
        (),
        "def test_split_installments_adds_up() -> None:\n"
        '    parts = split_installments(Decimal("100.00"), 3)\n'
        '    assert parts == [Decimal("33.34"), Decimal("33.33"), Decimal("33.33")]\n',
    ),
    _Feature(
        "pagination",
        "add a total_pages helper for the admin list views",
        "total_pages",
        "def total_pages(total: int, limit: int) -> int:\n    return max(1, -(-total // clamp_limit(limit)))\n",
        (),
        "def test_total_pages() -> None:\n    assert total_pages(45, 20) == 3\n",
    ),
    _Feature(
        "payments",
        "add a lookup of an order's payments for the support dashboard",
        "payments_for_order",
        "def payments_for_order(session: Session, order_id: int) -> list[Payment]:\n"
        "    stmt = select(Payment).where(Payment.order_id == order_id).order_by(Payment.created_at)\n"
        "    return list(session.scalars(stmt))\n",
        (("sqlalchemy", "select"),),
        "def test_payments_for_order(db_session: Session, monkeypatch: pytest.MonkeyPatch) -> None:\n"
        '    monkeypatch.setattr("shopapi.services.payments.settings", replace(settings, payment_provider="fake"))\n'
        "    order = make_order(db_session)\n"
        '    payment = capture_payment(db_session, order, "tok_visa")\n'
        "    db_session.flush()\n"
        "    assert payments_for_order(db_session, order.id) == [payment]\n",
    ),
)

_RENAMES = (
    ("order_total", "compute_order_total"),
    ("get_or_create_cart", "cart_for_user"),
    ("discount_for", "coupon_discount"),
    ("shipping_cost", "shipping_fee"),
    ("round_money", "quantize_money"),
    ("clamp_limit", "normalize_limit"),
    ("find_coupon", "get_valid_coupon"),
    ("reserve_stock", "hold_stock"),
    ("cart_subtotal", "cart_items_total"),
    ("format_price", "display_price"),
    ("search_products", "find_products"),
    ("slugify", "make_slug"),
)

_EXTRA_TESTS = {
    "shipping": (
        "test_shipping_cost_just_below_threshold",
        'assert shipping_cost(Decimal("49.99")) == Decimal("4.90")',
    ),
    "money": ("test_to_cents_rounds_half_up", 'assert to_cents(Decimal("0.005")) == 1'),
    "pagination": ("test_page_links_middle_page", 'assert set(page_links("/x", 20, 20, 100)) == {"next", "prev"}'),
    "coupons": (
        "test_zero_percent_coupon",
        'assert discount_for(make_coupon(db_session, percent=0), Decimal("10.00")) == Decimal("0.00")',
    ),
    "inventory": (
        "test_reserve_exactly_available",
        "product = make_product(db_session, stock=2)\nreserve_stock(db_session, product, 2)\n"
        "assert product.available == 0",
    ),
    "carts": (
        "test_remove_missing_item_is_noop",
        "cart = get_or_create_cart(db_session, make_user(db_session).id)\nremove_item(db_session, cart, 12345)\n"
        "assert cart.items == []",
    ),
    "catalog": (
        "test_slug_strips_accents",
        'data = ProductIn(sku="C-1", name="Crème Brûlée", price=Decimal("6.00"))\n'
        'assert create_product(db_session, data).slug == "creme-brulee"',
    ),
    "users": (
        "test_inactive_user_cannot_log_in",
        'user = make_user(db_session, email="off@example.com", password="s3cret-password")\n'
        "deactivate_user(db_session, user.id)\n"
        'assert authenticate(db_session, "off@example.com", "s3cret-password") is None',
    ),
    "orders": (
        "test_paid_order_cannot_be_paid_twice",
        'order = make_order(db_session, status="paid")\nwith pytest.raises(ConflictError):\n'
        "    mark_paid(db_session, order)",
    ),
}

_TAX_FAIL = _Fail(
    "pytest",
    "tests/test_orders.py",
    "test_order_total_includes_tax",
    "NameError: name 'add_tax' is not defined",
    'assert order_total(order) == Decimal("119.00")',
    ("shopapi/services/orders.py", "order_total", "return add_tax(taxable)"),
)
_PRICING_FAIL = _Fail(
    "pytest",
    "tests/test_carts.py",
    "test_cart_subtotal_rounds",
    "NameError: name 'cart_subtotal' is not defined",
    'assert cart_subtotal(db_session, cart) == Decimal("59.97")',
)

# (request, new module, its text, edits elsewhere, test file, source module, functions moved out of it,
#  the failure seen when the last ``held`` edits are still missing, held)
_Refactor = tuple[str, str, str, tuple[tuple[str, str, str], ...], str, str, tuple[str, ...], _Fail, int]
_REFACTORS: tuple[_Refactor, ...] = (
    (
        "pull the tax calculation out of order_total into its own module (shopapi/services/tax.py), "
        "we'll need per-country rates soon",
        "shopapi/services/tax.py",
        '"""Tax rules. One flat rate for now (settings.tax_rate); per-country rates will live here."""\n\n'
        "from __future__ import annotations\n\nfrom decimal import Decimal\n\n"
        "from shopapi.core.config import settings\nfrom shopapi.utils.money import round_money\n\n\n"
        "def add_tax(amount: Decimal) -> Decimal:\n    return round_money(amount * (1 + settings.tax_rate))\n\n\n"
        "def tax_part(gross: Decimal) -> Decimal:\n    return round_money(gross - gross / (1 + settings.tax_rate))\n",
        (
            (
                "shopapi/services/orders.py",
                "    return round_money(taxable * (1 + settings.tax_rate))",
                "    return add_tax(taxable)",
            ),
            (
                "shopapi/services/orders.py",
                "from shopapi.services.shipping import shipping_cost\n",
                "from shopapi.services.shipping import shipping_cost\nfrom shopapi.services.tax import add_tax\n",
            ),
        ),
        "tests/test_orders.py",
        "shopapi/services/orders.py",
        (),
        _TAX_FAIL,
        1,
    ),
    (
        "the cart pricing (cart_subtotal / cart_summary) should live in a pricing module, carts.py is getting "
        "big. move it and update the callers",
        "shopapi/services/pricing.py",
        '"""Prices of carts: subtotal and shipping."""\n\nfrom __future__ import annotations\n\n'
        "from decimal import Decimal\n\nfrom sqlalchemy.orm import Session\n\n"
        "from shopapi.models.cart import Cart\nfrom shopapi.models.product import Product\n"
        "from shopapi.services.shipping import shipping_cost\nfrom shopapi.utils.money import round_money\n\n\n"
        "def cart_subtotal(session: Session, cart: Cart) -> Decimal:\n"
        '    total = Decimal("0.00")\n    for item in cart.items:\n'
        "        product = session.get(Product, item.product_id)\n        if product is not None:\n"
        "            total += product.price * item.quantity\n    return round_money(total)\n\n\n"
        "def cart_summary(session: Session, cart: Cart) -> dict[str, Decimal]:\n"
        "    subtotal = cart_subtotal(session, cart)\n"
        '    return {"subtotal": subtotal, "shipping": shipping_cost(subtotal)}\n',
        (
            ("shopapi/services/carts.py", "from decimal import Decimal\n", ""),
            ("shopapi/services/carts.py", "from shopapi.services.shipping import shipping_cost\n", ""),
            ("shopapi/services/carts.py", "from shopapi.utils.money import round_money\n", ""),
            ("shopapi/services/carts.py", "from shopapi.models.product import Product\n", ""),
            (
                "shopapi/api/routes/carts.py",
                "from shopapi.services.carts import add_item, cart_summary, get_or_create_cart, remove_item\n",
                "from shopapi.services.carts import add_item, get_or_create_cart, remove_item\n"
                "from shopapi.services.pricing import cart_summary\n",
            ),
            ("tests/test_carts.py", "    cart_subtotal,\n", ""),
            (
                "tests/test_carts.py",
                "from tests.factories import make_product, make_user\n",
                "from shopapi.services.pricing import cart_subtotal\n"
                "from tests.factories import make_product, make_user\n",
            ),
        ),
        "tests/test_carts.py",
        "shopapi/services/carts.py",
        ("cart_subtotal", "cart_summary"),
        _PRICING_FAIL,
        1,
    ),
)

_INVESTIGATIONS = (
    (
        "why does cancelling an order sometimes not give the stock back? a customer cancelled order 18231 and the "
        "reserved count for SKU-00412 didn't go down",
        ("def cancel_order", "release_stock"),
        ("shopapi/services/orders.py", "shopapi/services/inventory.py", "shopapi/models/product.py"),
        "cancel_order releases stock line by line through release_stock, which looks the product up again and "
        "silently returns (with an error log) when it is missing. The likely cause for order 18231 is that "
        "SKU-00412 was deactivated or re-created after the order: release_stock only logs 'cannot release stock of "
        "missing product'. Check the logs for that message; if it's there, the fix is to release by the order "
        "line's product even when it is inactive.",
    ),
    (
        "where do we compute tax? is it on the discounted subtotal or the full one?",
        ("tax_rate", "def order_total"),
        ("shopapi/services/orders.py", "shopapi/core/config.py", "tests/test_orders.py"),
        "Tax is computed in `order_total` (shopapi/services/orders.py): `(subtotal - discount + shipping) * (1 + "
        "tax_rate)`, so it is on the discounted subtotal plus shipping. The rate is `settings.tax_rate` (0.19). "
        "`order.tax` is then derived as the difference between the total and the net amount.",
    ),
    (
        "how are coupons validated? can an expired coupon still be applied somewhere?",
        ("validate_coupon", "find_coupon", "valid_until"),
        ("shopapi/services/coupons.py", "shopapi/services/orders.py", "shopapi/models/coupon.py"),
        "All coupon lookups go through `find_coupon`, which calls `validate_coupon` (expiry via `valid_until` and "
        "`max_uses`). `create_order` only uses `find_coupon`, so an expired coupon cannot be applied there. "
        "One gap: `used_count` is never incremented anywhere, so `max_uses` is not enforced in practice.",
    ),
    (
        "what happens when stripe is down? do we leave orders in a weird state?",
        ("capture_payment", "PaymentError", "_provider_client"),
        ("shopapi/services/payments.py", "shopapi/api/routes/payments.py", "shopapi/core/errors.py"),
        "If Stripe times out, httpx raises and nothing catches it: the request fails with a 500 before "
        "`mark_paid`, so the order stays `pending` and no Payment row is written. A non-200 answer becomes "
        "`PaymentError` (402). Nothing retries; the client can simply pay again.",
    ),
    (
        "explain how auth works in this API, what's in the token?",
        ("create_access_token", "decode_access_token", "current_user"),
        ("shopapi/core/security.py", "shopapi/api/deps.py", "shopapi/api/routes/users.py"),
        "Tokens are home-made: base64url JSON `{sub, exp}` plus an HMAC-SHA256 signature with `settings.secret_key`"
        ", joined by a dot. `current_user` (api/deps.py) reads the Bearer token, checks the signature and expiry "
        "and loads the user; inactive users get 403.",
    ),
    (
        "is there any place where we do money math with floats?",
        ("float", r"\* 100", "to_cents"),
        ("shopapi/utils/money.py", "shopapi/services/payments.py", "shopapi/services/coupons.py"),
        "No floats in the Python money paths: amounts are Decimals and `to_cents` converts via `round_money` first. "
        "The only float-like spot is the TypeScript admin (`frontend/src/cart.ts`), which works in integer cents.",
    ),
    (
        "注文をキャンセルしたとき在庫はどう戻されていますか？コードを追って説明してください。",
        ("def cancel_order", "def release_stock"),
        ("shopapi/services/orders.py", "shopapi/services/inventory.py"),
        "`cancel_order` が各注文行について `release_stock` を呼び、`reserved` を数量分だけ減らします"
        "（0 未満にはなりません）。"
        "商品が見つからない場合はエラーログを出して何もしません。",
    ),
    (
        "쿠폰 할인 계산이 어디서 이루어지는지 설명해 줄래요?",
        ("discount_for", "coupon_code"),
        ("shopapi/services/coupons.py", "shopapi/services/orders.py"),
        "할인은 `shopapi/services/coupons.py`의 `discount_for`에서 계산됩니다. 퍼센트 쿠폰은 소계의 비율, 금액 쿠폰은 "
        "고정 금액이고, 소계를 넘지 않도록 `min`으로 제한한 뒤 `round_money`로 반올림합니다.",
    ),
    (
        "how does the nightly cleanup decide which carts to delete?",
        ("expire_stale_carts", "cart_ttl_hours"),
        ("shopapi/services/carts.py", "shopapi/workers/cleanup.py", "shopapi/models/cart.py"),
        "`shopapi/workers/cleanup.py` calls `expire_stale_carts(session, utcnow())`, which deletes every cart whose "
        "`updated_at` is older than `settings.cart_ttl_hours` (48 h by default). `updated_at` is bumped by "
        "SQLAlchemy's `onupdate` only when the cart row itself changes, so adding items does not keep a cart alive.",
    ),
    (
        "what does GET /products return if someone asks for limit=1000?",
        ("page_params", "page_size_max"),
        ("shopapi/api/deps.py", "shopapi/api/routes/products.py", "shopapi/services/catalog.py"),
        "The limit is clamped twice: `page_params` caps it at `settings.page_size_max` (100), and `list_products` "
        "applies the same cap again, so limit=1000 returns at most 100 products. No error is raised.",
    ),
    (
        "where are order confirmation emails sent from, and what happens if SMTP is down?",
        ("send_order_confirmation", "smtplib"),
        ("shopapi/services/emails.py", "shopapi/workers/email_worker.py"),
        "They are sent by the email worker (`run_once` in `shopapi/workers/email_worker.py`) through "
        "`send_order_confirmation`. If SMTP is down the whole batch raises, `main` logs 'email batch failed' and "
        "sleeps `POLL_SECONDS`; nothing marks orders as mailed, so the same orders are retried (and may be mailed "
        "twice).",
    ),
    (
        "how is the product slug generated? what happens with names like 'Crème Brûlée' or '!!!'?",
        ("slugify", "slug ="),
        ("shopapi/utils/slugs.py", "shopapi/services/catalog.py"),
        "`create_product` calls `slugify(name)`: NFKD-normalize, drop non-ASCII, lowercase, replace runs of "
        "non-alphanumerics with '-'. 'Crème Brûlée' becomes 'creme-brulee'; '!!!' becomes the fallback 'item', "
        "so a second such product would hit the duplicate-name check.",
    ),
    (
        "주문 총액 계산 순서(할인, 배송비, 세금)를 정리해 주세요",
        ("def order_total", "shipping_cost"),
        ("shopapi/services/orders.py", "shopapi/services/shipping.py"),
        "`create_order`에서 소계 → 쿠폰 할인 → (소계 - 할인) 기준 배송비 → `order_total`에서 (소계 - 할인 + 배송비)에 "
        "세율을 곱해 총액을 계산하고, 세금은 총액과 세전 금액의 차이로 저장합니다.",
    ),
)

_BUMPS = (
    ("sqlalchemy", "2.0.35", "2.0.36", "SQLAlchemy"),
    ("fastapi", "0.115.4", "0.115.5", "fastapi"),
    ("pydantic[email]", "2.9.2", "2.10.1", "pydantic"),
    ("httpx", "0.27.2", "0.27.3", "httpx"),
    ("pytest", "8.3.3", "8.3.4", "pytest"),
    ("ruff", "0.7.2", "0.8.0", "ruff"),
    ("mypy", "1.13.0", "1.14.0", "mypy"),
    ("uvicorn[standard]", "0.32.0", "0.32.1", "uvicorn"),
)


# ---------------------------------------------------------------- nominal work


def _pick_fail(b: _Builder, test: str, families: tuple[str, ...] | list[str], exclude: set[str]) -> _Fail | None:
    order = list(families)
    b.rng.shuffle(order)
    for family in order:
        fail = _pytest_fail(b.files, test, family, b.rng)
        if fail is not None and _normalize(fail.message) not in exclude:
            return fail
    return None


def _paste(output: str) -> str:
    keep = [ln for ln in output.split("\n") if ln.startswith(("E ", "FAILED", "ERROR", ">  ")) or "Error" in ln]
    return "\n".join(keep[:8])


def _fix_prompt(b: _Builder, area: _Area, fail: _Fail, node: str) -> str:
    rng = b.rng
    pasted = _paste(_pytest_output(b.files, node, fail, "q", random.Random(rng.random()))[0])
    name = fail.test or area.test
    options = [
        f"{node} is failing, can you take a look",
        f"fix the failing test in {area.test}",
        f"tests are broken after my last change to {area.module} 🙃 pls fix",
        f"CI is red on {b.branch}:\n\n```\n{pasted}\n```\n\nprobably something in {area.module}. please fix it "
        "and make sure the rest of the suite still passes",
        f"Getting this when I run pytest:\n{pasted}\n\nwhat's going on?",
        f"can you fix {name}? it started failing this morning, nothing changed on my side as far as I know",
        f"{area.test} 테스트가 깨졌어요. 원인 찾아서 고쳐주세요.",
        f"{node} が落ちています。原因を調べて修正してください。",
        f"pytest {area.test} fails with {fail.kind}. fix it, don't change the test unless it's actually wrong",
    ]
    return rng.choice(options)


def _ruff(b: _Builder) -> None:
    """``ruff check``; when it finds unused imports, ``ruff check --fix`` and check again."""
    modified, added = b.changed()
    findings = _ruff_findings(b.files, [p for p in modified + added if p.endswith(".py")])
    b.ruff()
    if findings:
        fixes = [fix for fix in (_unused_import_fix(b, f) for f in findings) if fix is not None]
        b.sh("ruff check --fix .", f"Found {len(findings)} errors ({len(findings)} fixed, 0 remaining).\n")
        for path, old, new in fixes:
            b.files[path] = b.files[path].replace(old, new, 1)
        b.ruff()


def _wrap_up(b: _Builder, suite: float = 0.7) -> str:
    """The usual end of a change: the whole suite, lint, a look at the diff. Returns a note for the summary."""
    rng, note = b.rng, ""
    if rng.random() < suite:
        if not b.big_log and rng.random() < 0.45:
            b.big_log = True
            command = "python -m pytest -v" if b.host == "claude" else "pytest -v"
            b.pytest("", command=command, log_size=rng.randrange(15000, 32000))
        else:
            b.pytest("")
        total = sum(len(_test_names(b.files[p])) for p in b.files if re.fullmatch(r"tests/test_\w+\.py", p))
        note = f" The full suite passes ({total} tests)."
    if rng.random() < 0.4:
        _ruff(b)
    if rng.random() < 0.2:
        b.mypy()
    if rng.random() < 0.5:
        b.git_diff(stat=rng.random() < 0.4)
    elif rng.random() < 0.3:
        b.git_status(short=rng.random() < 0.3)
    return note


def _turn_calls(b: _Builder) -> int:
    last = max(i for i, (kind, _) in enumerate(b.events) if kind == "user-prompt")
    return sum(1 for kind, _ in b.events[last:] if kind.startswith("post-tool"))


def _pad_turn(b: _Builder, area: _Area, minimum: int = 5) -> None:
    """Enough look-around for a turn to have ``minimum`` tool calls."""
    extra = [p for p in (*area.related, area.test, area.module) if p in b.files]
    b.rng.shuffle(extra)
    while _turn_calls(b) < minimum and extra:
        b.read(extra.pop())
    if _turn_calls(b) < minimum:
        b.git_status()


def _hiccup(b: _Builder) -> None:
    """A harmless failed command of the kind real sessions have (once at most)."""
    if b.rng.random() < 0.5:
        message = "curl: (7) Failed to connect to localhost port 8000 after 0 ms: Couldn't connect to server\n"
        b.sh("curl -s localhost:8000/api/v1/health", "", 7, err=message, ms=b.rng.randrange(5, 30))
    else:
        message = "ls: cannot access 'shopapi/services/legacy': No such file or directory\n"
        b.sh("ls shopapi/services/legacy", "", 2, err=message, ms=b.rng.randrange(2, 15))


def _explore(b: _Builder, area: _Area, symbol: str, most: int = 5) -> None:
    """Looking around before a change: a listing, searches (one refined), related files, history."""
    rng = b.rng
    kinds = ["glob", "grep", "refine", "related", "related", "log", "todo", "hiccup"]
    for kind in rng.sample(kinds, rng.randrange(0, most + 1)):
        unread = [p for p in (*area.related, area.test) if p not in b.read_paths]
        if kind == "glob":
            b.glob(area.module.rsplit("/", 1)[0] + "/*.py")
        elif kind == "grep":
            b.grep(rf"\b{symbol}\b", "shopapi tests", files_only=rng.random() < 0.4)
        elif kind == "refine":
            b.grep(rf"{symbol}\(", "shopapi")
        elif kind == "related" and unread:
            b.read(rng.choice(unread))
        elif kind == "log":
            b.git_log(area.module)
        elif kind == "todo":
            b.grep("TODO|FIXME|XXX", area.module.rsplit("/", 1)[0])
        elif kind == "hiccup" and rng.random() < 0.3:
            _hiccup(b)


def _task_fix_test(b: _Builder, area: _Area) -> None:
    rng = b.rng
    first = _pick_fail(b, area.test, PYTEST_FAMILIES, set())
    assert first is not None
    node = f"{area.test}::{first.test}" if first.test else area.test
    target = node if first.tool == "pytest" and rng.random() < 0.4 else area.test
    module = first.frame[0] if first.frame and first.frame[0].startswith("shopapi/") else area.module
    names = [first.frame[1]] if first.frame else re.findall(r"(\w+)\(", first.call)
    planted = _plant_for(b, first, module, names)
    b.prompt(_fix_prompt(b, area, first, node))
    steps = ["Run the failing test", f"Find the cause in {area.module}", "Fix it", "Run the full suite"]
    if rng.random() < 0.6:
        b.todo(steps, 0)
    b.pytest(target, first)
    b.read(area.test)
    b.read(planted[0] if planted else module)
    _explore(b, area, names[0] if names else "def", 4)
    if rng.random() < 0.45:
        _tweak(b, module, avoid=(planted[1][1],) if planted else (), near=_near(b.files[module], names))
        second = _pick_fail(b, area.test, PYTEST_FAMILIES, {_normalize(first.message)})
        if second is not None:
            b.pytest(target, second)
            if rng.random() < 0.5:
                b.read(planted[0] if planted else module)
    b.todo(steps, 2)
    if planted:
        _revert(b, *planted)
    else:
        _tweak(b, module, near=_near(b.files[module], names))
    b.pytest(target)
    b.todo(steps, 3)
    note = _wrap_up(b)
    b.todo(steps, 4)
    what = first.message.split("\n")[0][:90]
    where = planted[0] if planted else module
    b.stop(f"Fixed `{first.test or area.test}` ({what}). The cause was in `{where}`; `{target}` passes now.{note}")


def _feature_prompt(b: _Builder, feature: _Feature) -> str:
    area = _AREA[feature.area]
    return b.rng.choice(
        [
            feature.ask,
            f"can you {feature.ask}? add a test too",
            f"{feature.ask}. keep it consistent with the rest of {area.module} and add tests",
            f"Quick one: {feature.ask}",
            f"{area.module}에 `{feature.name}` 기능을 추가해 주세요 ({feature.ask}). 테스트도 같이 부탁해요.",
            f"{feature.ask} — {area.module} に `{feature.name}` を追加して、テストもお願いします。",
        ]
    )


def _task_feature(b: _Builder, feature: _Feature) -> None:
    rng, area = b.rng, _AREA[feature.area]
    b.prompt(_feature_prompt(b, feature))
    steps = [f"Add {feature.name} to {area.module}", "Add a test", "Run the tests"]
    if feature.route:
        steps.insert(1, f"Add the endpoint in {feature.route}")
    b.todo(steps, 0)
    b.read(area.module)
    _explore(b, area, rng.choice([f for f in _functions(b.files[area.module]) if not f.startswith("_")]), 6)
    _append(b, area.module, feature.code)
    for module, name in feature.imports:
        _add_import(b, area.module, module, name)
    dotted = area.module[:-3].replace("/", ".")
    if feature.route:
        b.read(feature.route)
        _append(b, feature.route, feature.route_code)
        _add_import(b, feature.route, dotted, feature.name)
    b.read(area.test)
    _append(b, area.test, feature.test)
    test_name = re.findall(r"def (test_\w+)", feature.test)[0]
    if rng.random() < 0.35:
        call = _function_lines(b.files[area.test], test_name)[1][-1].strip()
        b.pytest(
            area.test, _Fail("pytest", area.test, test_name, f"NameError: name '{feature.name}' is not defined", call)
        )
        b.read(area.test)
    _add_import(b, area.test, dotted, feature.name)
    b.todo(steps, len(steps) - 1)
    b.pytest(area.test)
    note = _wrap_up(b, 0.5)
    where = f" and `{feature.route}`" if feature.route else ""
    b.stop(f"Added `{feature.name}` in `{area.module}`{where}, with `{test_name}` in `{area.test}`.{note}")


def _task_rename(b: _Builder) -> None:
    rng = b.rng
    old, new = rng.choice(_RENAMES)
    b.prompt(
        rng.choice(
            [
                f"rename `{old}` to `{new}` everywhere",
                f"`{old}` is a confusing name, call it `{new}` and update all the callers",
                f"please rename {old} -> {new} (code and tests)",
                f"`{old}` を `{new}` にリネームしてください。呼び出し側もすべて。",
                f"`{old}` 함수 이름을 `{new}`로 바꿔 주세요. 호출하는 곳도 전부요.",
            ]
        )
    )
    _, paths = b.grep(rf"\b{old}\b", "shopapi tests scripts", files_only=rng.random() < 0.6)
    paths = [p for p in paths if p not in HUBS]
    b.todo([f"Rename {old} in {p}" for p in paths[:4]] + ["Run the tests"], 0)
    for i, path in enumerate(paths):
        if b.host == "claude" or rng.random() < 0.6:
            b.read(path)
        _rename_in(b, path, old, new)
        if i == 1:
            b.todo([f"Rename {old} in {p}" for p in paths[:4]] + ["Run the tests"], 2)
    b.grep(old, "shopapi tests scripts")
    tests = sorted({p for p in paths if p.startswith("tests/test_")}) or ["tests/test_orders.py"]
    for test in tests[:3]:
        b.pytest(test)
    if rng.random() < 0.6:
        b.mypy()
    note = _wrap_up(b, 0.4)
    b.stop(f"Renamed `{old}` to `{new}` in {len(paths)} files ({', '.join(paths[:5])}). No references left.{note}")


def _install_output(b: _Builder, package: str, old: str, new: str, dist: str) -> tuple[str, str]:
    if b.rng.random() < 0.5:
        command = "uv pip install -e '.[dev]'"
        out = f"Resolved {b.rng.randrange(38, 52)} packages in {b.rng.randrange(200, 900)}ms\n"
        out += f"Prepared 2 packages in {b.rng.randrange(100, 800)}ms\nUninstalled 2 packages in 9ms\n"
        out += f"Installed 2 packages in 11ms\n - {dist.lower()}=={old}\n + {dist.lower()}=={new}\n"
        return command, out + " ~ shopapi==0.7.2 (from file://" + REPO + ")\n"
    command = "pip install -e '.[dev]'"
    out = f"Obtaining file://{REPO}\n  Installing build dependencies ... done\n"
    out += "  Checking if build backend supports build_editable ... done\n"
    out += "  Getting requirements to build editable ... done\n"
    out += (
        f"  Preparing editable metadata (pyproject.toml) ... done\nCollecting {package}=={new} (from shopapi==0.7.2)\n"
    )
    out += f"  Downloading {dist}-{new}-py3-none-any.whl.metadata ({b.rng.randrange(3, 60)}.{b.rng.randrange(10)} kB)\n"
    out += (
        "Building wheels for collected packages: shopapi\n  Building editable for shopapi (pyproject.toml) ... done\n"
    )
    out += (
        f"Successfully built shopapi\nInstalling collected packages: {dist}, shopapi\n  Attempting uninstall: {dist}\n"
    )
    out += f"    Found existing installation: {dist} {old}\n    Uninstalling {dist}-{old}:\n"
    out += f"      Successfully uninstalled {dist}-{old}\nSuccessfully installed {dist}-{new} shopapi-0.7.2\n"
    return command, out


def _task_bump(b: _Builder) -> None:
    rng = b.rng
    package, old, new, dist = rng.choice(_BUMPS)
    name = package.split("[")[0]
    b.prompt(
        rng.choice(
            [
                f"bump {name} to {new} and make sure nothing breaks",
                f"dependabot wants {name} {old} -> {new}, can you do it by hand and run the tests",
                f"upgrade {name} to {new}",
                f"{name}を{new}に上げて、テストが通るか確認してください",
            ]
        )
    )
    b.read("pyproject.toml")
    if rng.random() < 0.5:
        b.grep(rf"^(from|import) {name.replace('-', '_')}", "shopapi tests", files_only=True)
    b.edit("pyproject.toml", f'"{package}=={old}",', f'"{package}=={new}",')
    command, out = _install_output(b, package, old, new, dist)
    b.sh(command, out, ms=rng.randrange(3000, 25000))
    if name == "ruff":
        _plant_unused_import(b, "shopapi/services/orders.py")
        _ruff(b)
    elif rng.random() < 0.35:
        area = rng.choice(_AREAS[:9])
        fail = _pick_fail(b, area.test, ("attr-none", "type-kw", "name"), set())
        if fail is not None:
            b.pytest("", fail)
            b.read(fail.frame[0] if fail.frame else area.module)
            _tweak(b, fail.frame[0] if fail.frame and fail.frame[0].startswith("shopapi/") else area.module)
    b.pytest("")
    note = _wrap_up(b, 0.0)
    b.stop(f"Bumped {name} {old} → {new} in pyproject.toml and reinstalled; the test suite passes.{note}")


def _task_investigate(b: _Builder) -> None:
    rng = b.rng
    prompt, greps, reads, answer = rng.choice(_INVESTIGATIONS)
    b.prompt(prompt)
    for pattern in greps[: rng.randrange(1, len(greps) + 1)]:
        b.grep(pattern, "shopapi")
    for path in reads:
        b.read(path)
    if rng.random() < 0.4:
        b.git_log(reads[0])
    if rng.random() < 0.4:
        b.grep(greps[0], "tests")
    _pad_turn(b, _Area("", reads[0], "tests/test_orders.py", tuple(reads), ""))
    b.stop(answer)


_README_SECTIONS = (
    (
        "the workers",
        "## Workers\n\nTwo background processes run next to the API:\n\n"
        "- `python -m shopapi.workers.email_worker` sends order confirmations for paid orders (polls every 15 s).\n"
        "- `python -m shopapi.workers.cleanup` deletes carts untouched for `SHOPAPI_CART_TTL_HOURS` hours "
        "(default 48); run it nightly.\n\n",
        ("shopapi/workers/email_worker.py", "shopapi/workers/cleanup.py"),
    ),
    (
        "coupons",
        "## Coupons\n\nA coupon gives either `percent` off or a fixed `amount_off`, never more than the subtotal. "
        "Codes are case-insensitive. `valid_until` and `max_uses` are checked when the code is looked up "
        "(`shopapi/services/coupons.py`).\n\n",
        ("shopapi/services/coupons.py", "shopapi/models/coupon.py"),
    ),
    (
        "the API errors",
        "## Errors\n\nServices raise `ShopError` subclasses (`shopapi/core/errors.py`); the app turns them into "
        '`{"error": code, "detail": message}` with the matching status: 404 `not_found`, 409 `conflict`, '
        "402 `payment_failed`.\n\n",
        ("shopapi/core/errors.py", "shopapi/main.py"),
    ),
)


def _task_docs(b: _Builder) -> None:
    rng = b.rng
    if rng.random() < 0.5 and "## Layout" in b.files["README.md"]:
        topic, section, sources = rng.choice(_README_SECTIONS)
        b.prompt(rng.choice([f"write a section in the README about {topic}", f"README: document {topic} please"]))
        for path in sources:
            b.read(path)
        b.read("README.md")
        if rng.random() < 0.5:
            b.grep(r"SHOPAPI_\w+", "README.md shopapi/core")
        b.edit("README.md", "## Layout", section + "## Layout")
        b.git_diff("README.md")
        _pad_turn(b, _Area("", sources[0], "README.md", sources, ""))
        b.stop(f"Added a section about {topic} to the README (before 'Layout'), based on {', '.join(sources)}.")
        return
    area = rng.choice([a for a in _AREAS if a.module.startswith("shopapi/")])
    b.prompt(
        rng.choice(
            [f"add docstrings to the public functions in {area.module}", f"{area.module} の関数に docstring を付けて"]
        )
    )
    b.read(area.module)
    done = 0
    for _ in range(rng.randrange(2, 6)):
        options = _choices(area.module, b.files[area.module], purpose="doc")
        if not options:
            break
        b.edit(area.module, *rng.choice(options))
        done += 1
    _ruff(b)
    b.pytest(area.test)
    _pad_turn(b, area)
    b.stop(f"Added docstrings to {done} functions in `{area.module}`; ruff and the tests pass.")


def _task_refactor(b: _Builder) -> bool:
    rng = b.rng
    usable = [r for r in _REFACTORS if r[1] not in b.files and all(b.files[p].count(o) == 1 for p, o, _ in r[3])]
    if not usable:
        return False
    ask, new_path, content, edits, test, source, moved, fail, held = rng.choice(usable)
    b.prompt(rng.choice([ask, f"refactor: {ask}", f"{ask}. no behaviour change please"]))
    b.read(source)
    b.grep(rf"\b({'|'.join(moved or ('order_total',))})\b", "shopapi tests", files_only=True)
    for path in dict.fromkeys(p for p, _, _ in edits):
        if path != source:
            b.read(path)
    b.write(new_path, content)
    for name in moved:
        _, body = _function_lines(b.files[source], name)
        b.edit(source, "\n\n\n" + "\n".join(body) + "\n", "\n")
    for path, old, new in edits[: len(edits) - held]:
        b.edit(path, old, new)
    if held and rng.random() < 0.6:
        b.pytest(test, fail)
        if b.host == "codex":
            b.read(edits[-1][0])
    for path, old, new in edits[len(edits) - held :]:
        b.edit(path, old, new)
    b.pytest(test)
    _ruff(b)
    note = _wrap_up(b, 0.6)
    b.stop(f"Moved the logic into `{new_path}` and updated the callers; behaviour is unchanged.{note}")
    return True


_CART_TS_PATH, _CART_TEST_PATH = "frontend/src/cart.ts", "frontend/src/cart.test.ts"
_PLURAL_OLD = "  return `${count} items, ${formatPrice(subtotalCents(cart), cart.currency)}`;"


def _frontend_plural(b: _Builder) -> None:
    cart, test = _CART_TS_PATH, _CART_TEST_PATH
    b.prompt("the admin cart summary says '1 items' — make it '1 item' when there's a single item")
    b.read(cart)
    b.read(test)
    new = '  const noun = count === 1 ? "item" : "items";\n'
    new += "  return `${count} ${noun}, ${formatPrice(subtotalCents(cart), cart.currency)}`;"
    b.edit(cart, _PLURAL_OLD, new)
    message = "AssertionError: expected '1 item, 12,50 €' to be '1 items, 12,50 €' // Object.is equality"
    b.npm_test(_Fail("vitest", test, "formats euros", message))
    b.edit(test, 'toBe("1 items, 12,50 €")', 'toBe("1 item, 12,50 €")')
    b.npm_test()
    b.tsc()
    b.stop(
        "cartSummary now says '1 item' for a single item; updated the test that expected '1 items'. Tests and tsc pass."
    )


def _frontend_floor(b: _Builder) -> None:
    cart, test = _CART_TS_PATH, _CART_TEST_PATH
    b.prompt(
        b.rng.choice(
            [
                "percentage coupons in the admin should round the discount down, finance wants it that way",
                "管理画面のクーポン割引は切り捨てにしてください",
            ]
        )
    )
    b.read(cart)
    b.grep("applyCoupon", "frontend/src")
    b.edit(cart, "Math.round((subtotal", "Math.floor((subtotal")
    b.read(test)
    anchor = '  });\n});\n\ndescribe("formatting"'
    case = '  });\n\n  it("rounds percentage discounts down", () => {\n'
    case += '    const cart = makeCart([{ sku: "A-3", name: "Cup", priceCents: 999, qty: 1 }]);\n'
    case += "    expect(applyCoupon(cart, { percent: 15 }).discountCents).toBe(149);\n"
    b.edit(test, anchor, case + anchor)
    b.npm_test()
    b.tsc()
    b.stop(
        "applyCoupon now rounds percentage discounts down (Math.floor) and there's a test for it; tests and tsc pass."
    )


def _tsc_fix(b: _Builder, fail: _Fail) -> None:
    """A plausible fix at the line tsc reported."""
    fixed = fail.call.replace("coupon?.percent)", "coupon?.percent ?? 0)").replace("(sum, line)", "(sum: number, line)")
    fixed = fixed.replace("line.priceCents", "line.priceCents!")
    if fixed == fail.call:
        fixed = fail.call + " // eslint-disable-line @typescript-eslint/no-unnecessary-condition"
    if b.files[fail.target].count(fail.call) == 1:
        b.edit(fail.target, fail.call, fixed)
    else:
        _tweak(b, fail.target)


def _frontend_types(b: _Builder) -> None:
    rng = b.rng
    b.prompt(
        rng.choice(["tsc fails in frontend/, can you fix the types?", "frontend typecheck is red on CI, please fix"])
    )
    fail = _tsc_fail(b.files, rng)
    b.tsc(fail)
    b.read(fail.target)
    _tsc_fix(b, fail)
    b.tsc()
    b.npm_test()
    related = ("frontend/src/format.ts", "frontend/package.json")
    _pad_turn(b, _Area("", _CART_TS_PATH, _CART_TEST_PATH, related, ""))
    b.stop(f"Fixed the type error in `{fail.target}` ({fail.message.split(': ', 1)[1]}). tsc and the tests pass.")


def _task_frontend(b: _Builder) -> None:
    scenario = b.rng.randrange(3)
    if scenario == 0 and _PLURAL_OLD in b.files[_CART_TS_PATH]:
        _frontend_plural(b)
    elif scenario == 1 and "Math.round((subtotal" in b.files[_CART_TS_PATH]:
        _frontend_floor(b)
    else:
        _frontend_types(b)


def _task_native(b: _Builder) -> None:
    rng, lib = b.rng, "native/src/lib.rs"
    if rng.random() < 0.5 and "apply_percent" not in b.files[lib]:
        b.prompt("add a percentage discount function to the rust pricing crate (native/), with tests")
        b.read(lib)
        b.read("native/Cargo.toml")
        body = "    apply_discount(cents, round_half_even(cents * percent / 10))"
        broken = rng.random() < 0.4
        code = "/// A percentage discount, rounded half to even.\n"
        code += "pub fn apply_percent(cents: i64, percent: i64) -> i64 {\n"
        code += body + (";" if broken else "") + "\n}\n\n#[no_mangle]"
        b.edit(lib, "#[no_mangle]", code)
        tail = '        assert_eq!(parse_amount("7"), Some(700));\n    }\n}'
        test = '        assert_eq!(parse_amount("7"), Some(700));\n    }\n\n    #[test]\n    fn percent_discount() {\n'
        test += "        assert_eq!(apply_percent(10_000, 15), 8_500);\n    }\n}"
        b.edit(lib, tail, test)
        if broken:
            b.cargo(
                _Fail("cargo", lib, "E0308", "mismatched types", body + ";", detail=("expected `i64`, found `()`",))
            )
            b.edit(lib, body + ";", body)
        b.cargo()
        b.stop("Added `apply_percent` (with a test) to native/src/lib.rs; `cargo test` passes.")
        return
    b.prompt(
        rng.choice(
            ["cargo test fails in native/, can you look?", "the rust pricing tests are red since yesterday, fix please"]
        )
    )
    fail, change = _cargo_fail(b.files, rng)
    _plant(b, lib, *change)
    b.cargo(fail)
    b.read(lib)
    if rng.random() < 0.5:
        b.grep(r"fn \w+", "native/src")
    _revert(b, lib, change)
    b.cargo()
    _pad_turn(b, _Area("", lib, "native/Cargo.toml", ("native/Cargo.toml", "README.md"), ""))
    b.stop(f"`cargo test` passes again; the failure was {fail.message} in native/src/lib.rs.")


def _unused_import_fix(b: _Builder, finding: str) -> tuple[str, str, str] | None:
    """(path, old, new) removing the import an F401 finding names."""
    match = re.match(r"([\w/.]+):(\d+):\d+: F401 \[\*\] `([\w.]+)`", finding)
    if not match:
        return None
    path, number, name = match.group(1), int(match.group(2)), match.group(3).rsplit(".", 1)[-1]
    line = b.files[path].split("\n")[number - 1]
    head, _, names = line.rpartition("import ")
    rest = [n.strip() for n in names.split(",") if n.strip() != name]
    if b.files[path].count(line + "\n") != 1:
        return None
    return path, line + "\n", (head + "import " + ", ".join(rest) + "\n") if rest else ""


_STRAY_IMPORTS = ("import json\n", "from typing import Any\n", "import os\n", "from pprint import pprint\n")


def _plant_unused_import(b: _Builder, path: str) -> None:
    """The user's own uncommitted change: an import nothing uses (no tool event)."""
    text = b.files[path]
    stray = b.rng.choice([s for s in _STRAY_IMPORTS if s not in text])
    b.files[path] = text.replace(
        "from __future__ import annotations\n\n", "from __future__ import annotations\n\n" + stray, 1
    )


def _task_lint(b: _Builder) -> None:
    rng = b.rng
    b.prompt(
        rng.choice(
            [
                "CI lint job is failing, run ruff and mypy and fix whatever they report",
                "make ruff and mypy happy",
                "ruff 돌려서 나오는 거 정리해 주세요. mypy도요.",
                "lint is red, please fix (don't just add noqa everywhere)",
            ]
        )
    )
    modules = rng.sample([a.module for a in _AREAS if a.module.startswith("shopapi/")], 3)
    for path in modules[: rng.randrange(1, 3)]:
        _plant_unused_import(b, path)
    if rng.random() < 0.5:
        _ruff(b)
    else:
        modified, added = b.changed()
        findings = _ruff_findings(b.files, [p for p in modified + added if p.endswith(".py")])
        b.ruff()
        for fix in (_unused_import_fix(b, f) for f in findings):
            if fix is not None:
                b.edit(*fix)
        b.ruff()
    fail = _mypy_fail(b.files, rng, modules)
    b.mypy(fail)
    if fail is not None:
        b.read(fail.target)
        _mypy_fix(b, fail)
        b.mypy()
    b.pytest("")
    _pad_turn(b, _AREAS[0])
    detail = f"; the mypy error in `{fail.target}` is fixed" if fail else ""
    b.stop(f"ruff and mypy are clean now (removed unused imports{detail}). The test suite still passes.")


def _mypy_fix(b: _Builder, fail: _Fail) -> None:
    """A plausible fix at the line mypy reported."""
    line, code = fail.call, (re.findall(r"\[([\w-]+)\]$", fail.message) or ["misc"])[0]
    if "round_money(" in line:
        new = re.sub(r"round_money\((.+)\)", r"round_money(Decimal(\1))", line, count=1)
    elif re.search(r"(\w+) = session\.get\(Product", line):
        new = re.sub(r"(\w+) = session\.get\(Product", r"\1: Product | None = session.get(Product", line, count=1)
    else:
        new = line + f"  # type: ignore[{code}]"
    if b.files[fail.target].count(line) == 1 and new != line:
        b.edit(fail.target, line, new)
    else:
        _tweak(b, fail.target)


_EXTRA_TEST_ASKS = {
    "shipping": "shipping cost just below the free-shipping threshold",
    "money": "to_cents rounding half a cent up",
    "pagination": "page_links on a page in the middle (next and prev)",
    "coupons": "a 0% coupon",
    "inventory": "reserving exactly the available stock",
    "carts": "removing an item that isn't in the cart",
    "catalog": "slugs of product names with accents",
    "users": "inactive users trying to log in",
    "orders": "paying an order that is already paid",
}


def _task_add_tests(b: _Builder) -> None:
    rng = b.rng
    area = _AREA[rng.choice(sorted(_EXTRA_TESTS))]
    name, body = _EXTRA_TESTS[area.name]
    if f"def {name}(" in b.files[area.test]:
        name = name + "_again"
    ask = _EXTRA_TEST_ASKS[area.name]
    b.prompt(
        rng.choice(
            [
                f"add a test for {ask}",
                f"we have no test for {ask} in {area.test}, add one",
                f"{area.test} にテストを追加してください（{ask}）",
                f"edge case: {ask}. is that covered? if not add a test",
            ]
        )
    )
    b.read(area.module)
    _explore(b, area, rng.choice(_functions(b.files[area.module])), 3)
    b.read(area.test)
    params = _TEST_SPECS[area.test][1]
    code = f"def {name}({params}) -> None:\n" + "".join(f"    {line}\n" for line in body.split("\n"))
    _append(b, area.test, code)
    last = body.split("\n")[-1]
    if rng.random() < 0.4 and " == " in last:
        fail = _Fail(
            "pytest",
            area.test,
            name,
            f"assert {_other_value(last.split(' == ')[1], rng)} == {_repr(last.split(' == ')[1])}",
            last,
        )
        b.pytest(area.test, fail)
        b.read(area.module)
        if _tweak(b, area.module) is None:
            b.read(area.test)
    b.pytest(area.test)
    note = _wrap_up(b, 0.3)
    b.stop(f"Added `{name}` to `{area.test}`; it passes.{note}")


_NEW_TEST_FILES: tuple[tuple[str, str, str, str, list[tuple[str, str]]], ...] = (
    (
        "tests/test_slugs.py",
        "shopapi/utils/slugs.py",
        "from shopapi.utils.slugs import slugify\n",
        "",
        [
            ("test_slugify_lowercases_and_dashes", 'assert slugify("Blue Mug XL") == "blue-mug-xl"'),
            ("test_slugify_strips_accents", 'assert slugify("Crème Brûlée") == "creme-brulee"'),
            ("test_slugify_falls_back_for_symbols", 'assert slugify("!!!") == "item"'),
            ("test_slugify_max_length", 'assert len(slugify("a" * 300, max_length=50)) == 50'),
        ],
    ),
    (
        "tests/test_dates.py",
        "shopapi/utils/dates.py",
        "from datetime import date, datetime\n\nfrom shopapi.utils.dates import add_business_days, to_local, utcnow\n",
        "",
        [
            (
                "test_add_business_days_skips_weekend",
                "assert add_business_days(date(2024, 11, 15), 1) == date(2024, 11, 18)",
            ),
            ("test_add_zero_business_days", "assert add_business_days(date(2024, 11, 15), 0) == date(2024, 11, 15)"),
            ("test_utcnow_is_naive", "assert utcnow().tzinfo is None"),
            ("test_to_local_converts_from_utc", "assert to_local(datetime(2024, 7, 1, 12, 0)).hour == 14"),
        ],
    ),
    (
        "tests/test_reviews.py",
        "shopapi/services/reviews.py",
        "from decimal import Decimal\n\nimport pytest\nfrom sqlalchemy.orm import Session\n\n"
        "from shopapi.services.reviews import add_review, average_rating\n"
        "from tests.factories import make_product, make_user\n",
        "db_session: Session",
        [
            (
                "test_rating_must_be_between_one_and_five",
                "with pytest.raises(ValueError):\n"
                "    add_review(db_session, make_product(db_session), make_user(db_session).id, 6)",
            ),
            (
                "test_average_rating",
                "product = make_product(db_session)\nfor rating in (4, 5):\n"
                "    add_review(db_session, product, make_user(db_session).id, rating)\n"
                'db_session.flush()\nassert average_rating(db_session, product.id) == Decimal("4.5")',
            ),
        ],
    ),
)


def _task_new_test_file(b: _Builder) -> bool:
    rng = b.rng
    options = [t for t in _NEW_TEST_FILES if t[0] not in b.files]
    if not options:
        return False
    path, module, header, params, cases = rng.choice(options)
    b.prompt(
        rng.choice(
            [
                f"there are no tests for {module}, please add a test module",
                f"add {path} covering {module}",
                f"{module} のテストファイルを作ってください",
                f"{module}에 대한 테스트 파일을 새로 만들어 주세요",
            ]
        )
    )
    b.read(module)
    if rng.random() < 0.6:
        b.glob("tests/test_*.py")
    b.read(rng.choice(["tests/test_money.py", "tests/test_shipping.py", "tests/conftest.py"]))
    b.write(path, _test_module(header, params, cases))
    fail = _assert_fail(b.files, path, rng) if rng.random() < 0.35 else None
    if fail is not None:
        b.pytest(path, fail)
        b.read(module)
        if _tweak(b, module) is None:
            b.read(path)
    b.pytest(path)
    _ruff(b)
    b.git_status(short=rng.random() < 0.4)
    b.stop(f"Added `{path}` with {len(cases)} tests for `{module}`; they pass and ruff is clean.")
    return True


def _follow_suite(b: _Builder) -> None:
    rng = b.rng
    b.prompt(
        rng.choice(
            [
                "run the whole test suite",
                "can you run all the tests + lint?",
                "全部のテストを流してください",
                "전체 테스트 돌려봐 주세요",
                "run everything once more before I push",
            ]
        )
    )
    if not b.big_log and rng.random() < 0.3:
        b.big_log = True
        b.pytest(
            "",
            command="python -m pytest -v" if b.host == "claude" else "pytest -v",
            log_size=rng.randrange(15000, 32000),
        )
    else:
        b.pytest("")
    _ruff(b)
    b.mypy()
    b.git_status(short=rng.random() < 0.3)
    if rng.random() < 0.5 or _turn_calls(b) < 5:
        b.git_diff(stat=True)
    if _turn_calls(b) < 5:
        b.git_log()
    b.stop("All green: the whole suite passes, ruff and mypy report nothing.")


def _follow_commit(b: _Builder) -> bool:
    rng = b.rng
    modified, added = b.changed()
    if not modified and not added:
        return False
    b.prompt(
        rng.choice(
            [
                "looks good, commit it",
                "commit with a sensible message",
                "ok ship it — commit please",
                "커밋해 주세요",
                "コミットしてください",
            ]
        )
    )
    b.git_status()
    b.git_diff(stat=True)
    if rng.random() < 0.5:
        b.git_diff()
    b.pytest("", command=b.test_command("") if " -q" in b.test_template else b.test_command("") + " -q")
    first = (modified + added)[0]
    message = rng.choice(
        [f"Update {first.rsplit('/', 1)[-1]}", f"{first.split('/')[-2]}: tidy up and add tests", "Fix review comments"]
    )
    b.commit(message)
    b.git_log()
    b.stop(f'Committed as "{message}" on {b.branch}.')
    return True


def _follow_small(b: _Builder) -> None:
    rng = b.rng
    area = rng.choice(_AREAS[:10])
    b.prompt(
        rng.choice(
            [
                f"also make {area.module} a bit more defensive about bad input",
                f"while you're at it, double-check the edge cases in {area.module}",
                f"ついでに {area.module} の入力チェックも見てください",
            ]
        )
    )
    b.read(area.module)
    _explore(b, area, rng.choice(_functions(b.files[area.module])), 2)
    _tweak(b, area.module)
    b.pytest(area.test)
    if rng.random() < 0.5:
        _ruff(b)
    b.git_diff(area.module)
    _pad_turn(b, area)
    b.stop(f"Added a guard in `{area.module}`; `{area.test}` still passes.")


_MAIN_TASKS: tuple[tuple[int, str], ...] = (
    (5, "fix"),
    (3, "feature"),
    (2, "rename"),
    (1, "bump"),
    (3, "investigate"),
    (1, "docs"),
    (1, "refactor"),
    (1, "frontend"),
    (1, "native"),
    (1, "lint"),
    (2, "tests"),
    (1, "new tests"),
)


def _main_task(b: _Builder, kind: str = "") -> None:
    rng = b.rng
    kind = kind or rng.choices([k for _, k in _MAIN_TASKS], [w for w, _ in _MAIN_TASKS])[0]
    if kind == "fix":
        _task_fix_test(b, rng.choice(_AREAS))
    elif kind == "feature":
        usable = [f for f in _FEATURES if f"def {f.name}(" not in b.files[_AREA[f.area].module]]
        if usable:
            _task_feature(b, rng.choice(usable))
        else:
            _task_investigate(b)
    elif kind == "rename":
        _task_rename(b)
    elif kind == "bump":
        _task_bump(b)
    elif kind == "investigate":
        _task_investigate(b)
    elif kind == "docs":
        _task_docs(b)
    elif kind == "refactor":
        if not _task_refactor(b):
            _task_add_tests(b)
    elif kind == "frontend":
        _task_frontend(b)
    elif kind == "native":
        _task_native(b)
    elif kind == "lint":
        _task_lint(b)
    elif kind == "new tests" and _task_new_test_file(b):
        return
    else:
        _task_add_tests(b)


def _followup(b: _Builder) -> None:
    choice = b.rng.random()
    if choice < 0.3:
        _follow_suite(b)
    elif choice < 0.6 and _follow_commit(b):
        return
    elif choice < 0.8:
        _follow_small(b)
    else:
        _main_task(b)


def _nominal(b: _Builder) -> None:
    rng = b.rng
    if rng.random() < 0.08:
        b.cwd = f"{REPO}/frontend"
        b.start()
        _task_frontend(b)
        if rng.random() < 0.5:
            _task_frontend(b)
        b.end()
        return
    b.start()
    _main_task(b)
    for _ in range(rng.choice((0, 0, 1, 1, 2))):
        if rng.random() < 0.6:
            _followup(b)
        else:
            _main_task(b)
    b.end()


# ---------------------------------------------------------------- planted problems


class _Retry(Exception):
    """This draw cannot host the planted problem; draw again."""


def _earlier_turn(b: _Builder, chance: float) -> None:
    if b.rng.random() < chance:
        _main_task(b, b.rng.choice(("investigate", "tests", "docs", "fix", "feature")))


_PAIN_TOOLS = ("assert", "import", "module", "type-op", "type-kw", "attr-none", "tsc", "cargo", "vitest", "mypy")


@dataclass
class _PainPlan:
    fail: _Fail
    run: Callable[[_Fail | None], int]
    paths: list[str]  # files the agent edits while trying
    avoid: tuple[str, ...]  # texts those edits leave alone (so the error stays the same)
    cause: tuple[str, tuple[str, str]] | None = None  # the user's change behind it: path, (correct, broken)


def _pain_other(b: _Builder, tool: str) -> _PainPlan:
    rng, files = b.rng, b.files
    if tool == "tsc":
        fail = _tsc_fail(files, rng)
        paths = ["frontend/src/cart.ts", "frontend/src/format.ts", "frontend/src/cart.test.ts"]
        return _PainPlan(fail, lambda f: b.tsc(f, fixed=True), paths, (fail.call,))
    if tool == "vitest":
        fail, path, change = _vitest_fail(files, rng)
        _plant(b, path, *change)
        paths = ["frontend/src/cart.ts", "frontend/src/format.ts"]
        return _PainPlan(fail, lambda f: b.npm_test(f, fixed=True), paths, (change[1],), (path, change))
    if tool == "cargo":
        fail, change = _cargo_fail(files, rng)
        _plant(b, "native/src/lib.rs", *change)
        plan = _PainPlan(fail, lambda f: b.cargo(f, fixed=True), ["native/src/lib.rs"], (fail.call, change[1]))
        plan.cause = ("native/src/lib.rs", change)
        return plan
    modules = [a.module for a in _AREAS if a.module.startswith("shopapi/services/")]
    typed = _mypy_fail(files, rng, modules)
    if typed is None:
        raise _Retry
    return _PainPlan(typed, lambda f: b.mypy(f), [typed.target, "shopapi/utils/money.py"], (typed.call,))


def _pain_setup(b: _Builder, tool: str) -> _PainPlan:
    """The repeated failure, how to run it, and the user's change behind it."""
    if tool in ("tsc", "vitest", "cargo", "mypy"):
        return _pain_other(b, tool)
    rng, files = b.rng, b.files
    found: tuple[_Area, _Fail] | None = None
    for area in rng.sample(_AREAS, len(_AREAS)):
        maybe = _pytest_fail(files, area.test, tool, rng)
        if maybe is not None:
            found = (area, maybe)
            break
    if found is None:
        raise _Retry
    area, fail = found
    target = f"{area.test}::{fail.test}" if fail.test and rng.random() < 0.4 else area.test
    command = b.test_command(target)
    module = fail.frame[0] if fail.frame and fail.frame[0].startswith("shopapi/") else area.module
    cause = _plant_for(b, fail, module, [fail.frame[1]] if fail.frame else re.findall(r"(\w+)\(", fail.call))
    avoid = [fail.call] + ([cause[1][1]] if cause else [])
    if fail.test:
        avoid.append("\n".join(_function_lines(files[area.test], fail.test)[1]))
    if fail.frame:
        avoid.append("\n".join(_function_lines(files[fail.frame[0]], fail.frame[1])[1]))
    paths = [module, area.test] if fail.tool == "pytest" else [area.module, module]
    return _PainPlan(fail, lambda f: b.pytest(target, f, command=command), paths, tuple(avoid), cause)


_PAIN_PROMPTS = (
    "{what} is failing and I need it green before the release, please fix",
    "fix {what}",
    "I changed a couple of things and now {what} fails. can you sort it out?",
    "{what} 가 계속 실패해요. 고쳐 주세요.",
    "{what} が通りません。直してもらえますか",
    "CI says {what} is broken on {branch}. fix it without skipping anything",
)


def _pain_attempts(b: _Builder, plan: _PainPlan) -> list[int]:
    """Five runs failing the same way, with attempted fixes (at least one edit) between them."""
    rng, failures = b.rng, []
    for attempt in range(5):
        failures.append(plan.run(plan.fail))
        if attempt == 4:
            break
        tried = 0
        for _ in range(rng.randrange(1, 4)):
            path = rng.choice(plan.paths)
            if rng.random() < 0.4:
                b.read(path)
            elif _tweak(b, path, plan.avoid) is not None:
                tried += 1
        while not tried:
            if _tweak(b, rng.choice(plan.paths), plan.avoid) is not None:
                tried += 1
            elif all(not _choices(p, b.files[p], plan.avoid) for p in plan.paths):
                raise _Retry
    return failures


def _pain_fix(b: _Builder, plan: _PainPlan, tool: str) -> None:
    if plan.cause is not None:
        b.read(plan.cause[0])
        _revert(b, *plan.cause)
    elif tool == "mypy":
        b.read(plan.fail.target)
        _mypy_fix(b, plan.fail)
    elif tool == "tsc":
        b.read(plan.fail.target)
        _tsc_fix(b, plan.fail)
    else:
        b.read(plan.paths[0])
        _tweak(b, plan.paths[0], plan.avoid)
    plan.run(None)


def _pain(b: _Builder, index: int) -> int:
    rng = b.rng
    b.start()
    _earlier_turn(b, 0.3)
    tool = _PAIN_TOOLS[index % len(_PAIN_TOOLS)]
    plan = _pain_setup(b, tool)
    fail = plan.fail
    names = {"tsc": "the frontend typecheck", "vitest": "npm test in frontend", "cargo": "cargo test in native/"}
    what = {**names, "mypy": "mypy"}.get(tool, fail.target)
    b.prompt(rng.choice(_PAIN_PROMPTS).format(what=what, branch=b.branch))
    for path in plan.paths[: rng.randrange(1, len(plan.paths) + 1)]:
        b.read(path)
    if plan.paths[0].endswith(".py"):
        area = next((a for a in _AREAS if a.module == plan.paths[0] or a.test in plan.paths), _AREAS[0])
        _explore(b, area, (_functions(b.files[plan.paths[0]]) or ["main"])[0], 3)
    if rng.random() < 0.5:
        word = fail.test or (re.findall(r"[A-Za-z_]\w{3,}", fail.call) or ["def"])[0]
        where = {"tsc": "frontend/src", "vitest": "frontend/src", "cargo": "native/src"}.get(tool, "shopapi tests")
        b.grep(re.escape(word), where)
    failures = _pain_attempts(b, plan)
    if rng.random() < 0.5:
        _pain_fix(b, plan, tool)
        where = plan.cause[0] if plan.cause else fail.target
        b.stop(f"Finally fixed: the failure ({fail.message[:80]}) came from a change in `{where}`. It passes now.")
    else:
        b.stop(
            f"I tried several fixes but it still fails with the same error: {fail.message[:100]}. "
            "I'm stuck here; could you check whether something in the environment changed?"
        )
    b.end()
    return failures[2]


_LOOP_PROMPTS = (
    "why is {module} behaving differently in prod? figure out where {symbol} gets its value",
    "something's off with {symbol}, can you trace where it's used and fix it",
    "{symbol} の使われ方を調べて、おかしいところを直してください",
    "check all callers of {symbol} and tell me if any of them pass the wrong thing",
    "{symbol} 호출하는 곳들을 확인하고 문제 있으면 고쳐 주세요",
)


def _loop(b: _Builder, index: int) -> int:
    rng = b.rng
    b.start()
    _earlier_turn(b, 0.3)
    area = rng.choice(_AREAS[:10])
    symbol = rng.choice([f for f in _functions(b.files[area.module]) if not f.startswith("_")] or [area.name])
    b.prompt(rng.choice(_LOOP_PROMPTS).format(module=area.module, symbol=symbol))
    b.read(area.module)
    _explore(b, area, symbol, 4)
    if rng.random() < 0.6:
        _tweak(b, area.module)
        b.pytest(area.test)
    others = [p for p in (*area.related, area.test, "README.md", "shopapi/api/deps.py") if p in b.files]
    rng.shuffle(others)
    first = _loop_call(b, index, area, symbol)
    repeats = [first]
    for _ in range(rng.choice((2, 2, 3))):
        for _ in range(rng.choice((0, 1, 1, 2, 2))):
            if others:
                b.read(others.pop())
            else:
                b.pytest(area.test)
        repeats.append(b.repeat(first))
    if rng.random() < 0.6:
        _tweak(b, area.module)
        b.pytest(area.test)
        b.stop(f"Traced the callers of `{symbol}` and tightened `{area.module}`; `{area.test}` passes.")
    else:
        b.stop(f"`{symbol}` is only called from the places above and they all pass the right values; nothing to fix.")
    b.end()
    return repeats[2]


def _loop_call(b: _Builder, index: int, area: _Area, symbol: str) -> int:
    """The read-only call that is going to be repeated (varied by the session's index)."""
    choice = index % 6
    if choice == 0:
        return b.grep(rf"\b{symbol}\(", "shopapi tests")[0]
    if choice == 1:
        return b.read(area.module)
    if choice == 2:
        return b.git_diff()
    if choice == 3:
        return b.grep(symbol, "shopapi", files_only=True)[0]
    if choice == 4:
        return b.glob(area.module.rsplit("/", 1)[0] + "/*.py")[0]
    return b.git_status(short=b.rng.random() < 0.5)


# (request, hub, old text, new text, files to read first, test file)
_REACHES = (
    (
        "make the free shipping threshold configurable via env, marketing wants to try 39 EUR",
        "shopapi/core/config.py",
        '    free_shipping_over: Decimal = Decimal("50.00")',
        '    free_shipping_over: Decimal = field(default_factory=lambda: Decimal(_env("FREE_SHIPPING_OVER", "50.00")))',
        ("shopapi/services/shipping.py",),
        "tests/test_shipping.py",
    ),
    (
        "add a REDIS_URL setting, we'll use it for rate limiting next sprint",
        "shopapi/core/config.py",
        '    log_level: str = field(default_factory=lambda: _env("LOG_LEVEL", "INFO"))',
        '    log_level: str = field(default_factory=lambda: _env("LOG_LEVEL", "INFO"))\n'
        '    redis_url: str = field(default_factory=lambda: _env("REDIS_URL", "redis://localhost:6379/0"))',
        ("README.md",),
        "tests/test_config.py",
    ),
    (
        "page_size_max should be 200, the admin export needs bigger pages",
        "shopapi/core/config.py",
        "    page_size_max: int = 100",
        "    page_size_max: int = 200",
        ("shopapi/utils/pagination.py", "shopapi/api/deps.py"),
        "tests/test_pagination.py",
    ),
    (
        "the cart TTL has to come from the environment (SHOPAPI_CART_TTL_HOURS)",
        "shopapi/core/config.py",
        "    cart_ttl_hours: int = 48",
        '    cart_ttl_hours: int = field(default_factory=lambda: _env_int("CART_TTL_HOURS", 48))',
        ("shopapi/services/carts.py", "shopapi/workers/cleanup.py"),
        "tests/test_carts.py",
    ),
    (
        "we need a setting for the stripe webhook signing secret",
        "shopapi/core/config.py",
        '    stripe_api_key: str = field(default_factory=lambda: _env("STRIPE_API_KEY", ""))',
        '    stripe_api_key: str = field(default_factory=lambda: _env("STRIPE_API_KEY", ""))\n'
        '    stripe_webhook_secret: str = field(default_factory=lambda: _env("STRIPE_WEBHOOK_SECRET", ""))',
        ("shopapi/services/payments.py", "shopapi/api/routes/payments.py"),
        "tests/test_payments.py",
    ),
    (
        "we're launching in Austria, the tax rate must be configurable (SHOPAPI_TAX_RATE)",
        "shopapi/core/config.py",
        '    tax_rate: Decimal = Decimal("0.19")',
        '    tax_rate: Decimal = field(default_factory=lambda: Decimal(_env("TAX_RATE", "0.19")))',
        ("shopapi/services/orders.py",),
        "tests/test_orders.py",
    ),
    (
        "prod logs show 'server closed the connection unexpectedly' after idle periods. add pool_recycle",
        "shopapi/core/db.py",
        "    pool_pre_ping=True,",
        "    pool_pre_ping=True,\n    pool_recycle=1800,",
        ("shopapi/api/deps.py",),
        "tests/test_orders.py",
    ),
    (
        "the scripts need a plain generator dependency for sessions, add get_session next to session_scope",
        "shopapi/core/db.py",
        "def ping() -> bool:",
        "def get_session() -> Iterator[Session]:\n    with session_scope() as session:\n        yield session\n\n\n"
        "def ping() -> bool:",
        ("scripts/seed_data.py", "shopapi/api/deps.py"),
        "tests/test_orders.py",
    ),
)


def _reach(b: _Builder, index: int) -> int:
    rng = b.rng
    b.start()
    _earlier_turn(b, 0.3)
    ask, hub, old, new, reads, test = _REACHES[index % len(_REACHES)]
    b.prompt(rng.choice([ask, f"{ask}. run the tests after", f"small change: {ask}"]))
    b.read(hub)
    setting = re.findall(r"^\s+(\w+)[:=]", old)
    if setting:
        b.grep(rf"settings\.{setting[0]}\b", "shopapi tests")
    for path in reads:
        b.read(path)
    area = next((a for a in _AREAS if a.module == reads[0]), _AREAS[0])
    _explore(b, area, rng.choice(_functions(b.files[area.module])), 3)
    if rng.random() < 0.3 and reads[0].endswith(".py"):
        _tweak(b, reads[0])
    if b.host == "claude" and rng.random() < 0.2:
        step = b.write(hub, b.files[hub].replace(old, new, 1))
    elif b.host == "claude" and rng.random() < 0.25 and "field(" in new and "from dataclasses" in b.files[hub]:
        step = b.multi_edit(hub, [(old, new)])
    else:
        step = b.edit(hub, old, new)
    if rng.random() < 0.5 and reads[0].endswith(".py"):
        _tweak(b, reads[0])
    b.pytest(test)
    if rng.random() < 0.5:
        b.pytest("")
    if rng.random() < 0.4:
        _ruff(b)
    b.git_diff(stat=rng.random() < 0.5)
    b.stop(f"Changed `{hub}` ({ask.split(',')[0]}) and ran `{test}`; everything passes.")
    b.end()
    return step


_LOGGERS = (
    ("uvicorn.access", "INFO", '172.18.0.{a} - "GET /api/v1/products?offset={o}&limit=20 HTTP/1.1" 200'),
    ("uvicorn.access", "INFO", '172.18.0.{a} - "POST /api/v1/orders HTTP/1.1" 201'),
    ("shopapi.services.orders", "INFO", "order {id} created for user {u}: {amount} EUR"),
    ("shopapi.workers.email_worker", "INFO", "sent order confirmation order_id={id} to=user{u}@example.com in {ms}ms"),
    ("shopapi.services.payments", "WARNING", 'payment for order {id} failed: {{"error": {{"code": "card_declined"}}}}'),
    ("shopapi.services.inventory", "WARNING", "low stock for SKU-{sku}: {q} left"),
    (
        "sqlalchemy.engine.Engine",
        "INFO",
        "SELECT orders.id, orders.user_id, orders.status, orders.subtotal, orders.discount, orders.shipping, "
        "orders.tax, orders.total, orders.currency, orders.created_at FROM orders WHERE orders.created_at >= "
        "%(created_at_1)s ORDER BY orders.id [cached since {s}.{ms}s ago] {{'created_at_1': '2024-11-01'}}",
    ),
)
_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/app/shopapi/workers/email_worker.py", line 44, in main\n    sent = run_once()\n'
    '  File "/app/shopapi/workers/email_worker.py", line 33, in run_once\n    send_order_confirmation(user, order)\n'
    '  File "/app/shopapi/services/emails.py", line 38, in _send\n    smtp.send_message(message)\n'
    "smtplib.SMTPServerDisconnected: Connection unexpectedly closed"
)


def _app_log(rng: random.Random, size: int, prefix: str = "") -> str:
    out, total, second = [], 0, rng.randrange(3600 * 24)
    while total < size:
        second += rng.randrange(0, 3)
        stamp = (
            f"2024-11-{13 + second // 86400:02d} {second // 3600 % 24:02d}:{second // 60 % 60:02d}:{second % 60:02d}"
        )
        name, level, template = rng.choice(_LOGGERS)
        values: dict[str, object] = {"a": rng.randrange(2, 40), "o": 20 * rng.randrange(60)}
        values["id"] = rng.randrange(18000, 19999)
        values.update({"u": rng.randrange(100, 9000), "amount": f"{rng.randrange(5, 400)}.{rng.randrange(100):02d}"})
        values.update({"ms": rng.randrange(10, 999), "sku": f"{rng.randrange(1, 900):05d}", "q": rng.randrange(6)})
        values["s"] = rng.randrange(1, 900)
        line = f"{prefix}{stamp},{rng.randrange(1000):03d} {level} [{name}] {template.format(**values)}"
        if rng.random() < 0.01:
            line += f"\n{prefix}{stamp} ERROR [shopapi.workers.email_worker] email batch failed\n{_TRACEBACK}"
        out.append(line)
        total += len(line) + 1
    return "\n".join(out) + "\n"


def _csv_dump(rng: random.Random, size: int) -> str:
    out = ["id,created_at,user_id,status,subtotal,discount,shipping,tax,total,currency"]
    total, order = 0, 17000
    while total < size:
        order += 1
        sub = rng.randrange(500, 40000) / 100
        disc = round(sub * rng.choice((0, 0, 0, 0.1, 0.15)), 2)
        ship = 0.0 if sub - disc >= 50 else 4.9
        tax = round((sub - disc + ship) * 0.19, 2)
        status = rng.choice(("paid", "paid", "shipped", "cancelled", "pending", "refunded"))
        line = f"{order},2024-{rng.randrange(1, 12):02d}-{rng.randrange(1, 29):02d}T{rng.randrange(24):02d}:"
        line += f"{rng.randrange(60):02d}:{rng.randrange(60):02d},{rng.randrange(100, 9000)},{status},{sub:.2f},"
        line += f"{disc:.2f},{ship:.2f},{tax:.2f},{sub - disc + ship + tax:.2f},EUR"
        out.append(line)
        total += len(line) + 1
    return "\n".join(out) + "\n"


def _json_dump(rng: random.Random, size: int) -> str:
    out, total, n = ["["], 0, 0
    adjectives = ("Classic", "Organic", "Compact", "Deluxe", "Vintage", "Smart", "Travel", "Bamboo")
    nouns = ("Mug", "Backpack", "Lamp", "Notebook", "Kettle", "Scarf", "Speaker", "Planter")
    while total < size:
        n += 1
        name = f"{rng.choice(adjectives)} {rng.choice(nouns)} {n}"
        item = (
            f'  {{\n    "id": {n},\n    "sku": "SKU-{n:05d}",\n    "name": "{name}",\n'
            f'    "slug": "{name.lower().replace(" ", "-")}",\n    "price": "{rng.randrange(299, 19999) / 100:.2f}",\n'
            f'    "currency": "EUR",\n    "available": {rng.randrange(0, 80)}\n  }},'
        )
        out.append(item)
        total += len(item) + 1
    out[-1] = out[-1].rstrip(",")
    return "\n".join([*out, "]"]) + "\n"


def _sql_test_log(rng: random.Random, size: int, files: dict[str, str]) -> str:
    names = _test_names(files["tests/test_api_orders.py"]) + _test_names(files["tests/test_orders.py"])
    out, total = [_bar("test session starts"), f"rootdir: {REPO}", "collected 12 items", ""], 0
    while total < size:
        test = rng.choice(names)
        block = [f"tests/test_api_orders.py::{test} "]
        for _ in range(rng.randrange(5, 30)):
            statement = rng.choice(_LOGGERS[6:])[2].format(s=rng.randrange(1, 90), ms=rng.randrange(999))
            block.append(f"INFO sqlalchemy.engine.Engine {statement}")
            block.append(f"INFO sqlalchemy.engine.Engine [generated in 0.000{rng.randrange(10, 99)}s] ()")
        block.append("PASSED")
        out += block
        total += sum(len(x) + 1 for x in block)
    return "\n".join(out) + f"\n{_bar(f'12 passed in {rng.uniform(2, 9):.2f}s')}\n"


def _psql_dump(rng: random.Random, size: int) -> str:
    head = "  id   | user_id |  status   | subtotal | discount | shipping |  tax  |  total  | coupon_code \n"
    out, total, order = [head + "-" * 6 + ("+" + "-" * 9) * 8 + "+" + "-" * 13], 0, 16000
    while total < size:
        order += 1
        sub = rng.randrange(500, 40000) / 100
        disc = round(sub * rng.choice((0, 0, 0, 0.1)), 2)
        ship = 0.0 if sub - disc >= 50 else 4.9
        tax = round((sub - disc + ship) * 0.19, 2)
        code = rng.choice(("", "", "", "SPRING10", "WELCOME5"))
        status = rng.choice(("paid", "shipped", "cancelled", "pending"))
        line = f" {order:5} | {rng.randrange(100, 9000):7} | {status:9} | {sub:8.2f} | {disc:8.2f} | {ship:8.2f} "
        line += f"| {tax:5.2f} | {sub - disc + ship + tax:7.2f} | {code}"
        out.append(line)
        total += len(line) + 1
    return "\n".join(out) + f"\n({len(out) - 1} rows)\n\n"


# (request, the commands it leads to, in order of preference, and the conclusion)
_BURN_SCENARIOS = (
    (
        "the nightly export took 3 hours yesterday, figure out why. logs are in logs/",
        (7, 2, 0, 6, 5),
        "The export spends nearly all its time in one query: `orders.created_at >= ...` without an index, "
        "repeated for every page. An index on orders.created_at (and streaming the rows) should fix it.",
    ),
    (
        "the email worker keeps dying in prod, I copied the logs into logs/. what's going on?",
        (1, 0, 6, 5, 7),
        "The worker dies on `SMTPServerDisconnected`: the SMTP server drops idle connections and `_send` does not "
        "retry. The batch fails and the worker sleeps a full poll interval each time.",
    ),
    (
        "some orders from last month have wrong totals, dump them and check against the rules",
        (2, 8, 4, 0),
        "Totals are consistent with the rules for all orders I checked except those with SPRING10: their tax was "
        "computed before the discount. They were created before the fix in 'compute tax on the discounted subtotal'.",
    ),
    (
        "test_api_orders is slow and sometimes flaky, run it with SQL echo and look at the queries",
        (3, 9, 5, 0),
        "Each API test issues the same product SELECT once per cart line (N+1 in create_order) and the flaky one "
        "depends on insertion order. Loading the products in one query fixes both.",
    ),
    (
        "프로덕션 로그(logs/)를 보고 워커가 왜 죽는지 알아봐 주세요",
        (1, 0, 5, 6),
        "워커는 SMTP 서버가 연결을 끊을 때(`SMTPServerDisconnected`) 재시도 없이 배치 전체가 실패합니다. "
        "_send에 재시도를 넣거나 연결을 매번 새로 여는 것이 좋겠습니다.",
    ),
    (
        "logs/ にある本番ログを見て、注文確定メールが遅れている原因を調べてください",
        (0, 1, 6, 5),
        "SMTP 接続が数分おきに切断され、そのたびにワーカーがバッチを失敗扱いにしてポーリング間隔ぶん待機しています。"
        "再接続とリトライを入れれば遅延は解消するはずです。",
    ),
)
_HUGE_COMMANDS = {
    0: "cat logs/app.log",
    1: "cat logs/worker.log",
    2: "python scripts/export_orders.py --since 2024-10-01",
    3: "SHOPAPI_DEBUG=1 pytest -vv -s tests/test_api_orders.py",
    4: "curl -s 'localhost:8000/api/v1/products?limit=5000' | python -m json.tool",
    5: "docker compose logs api --no-color",
    6: "tail -n 20000 logs/app.log.1",
    7: "cat logs/export-2024-11-13.log",
    8: 'psql "$SHOPAPI_DATABASE_URL" -c "select * from orders where created_at >= \'2024-10-01\' order by id"',
    9: "SHOPAPI_DEBUG=1 pytest -vv -s tests/test_orders.py",
}


def _huge_output(b: _Builder, which: int, size: int) -> str:
    rng = b.rng
    if which == 2:
        return _csv_dump(rng, size)
    if which in (3, 9):
        return _sql_test_log(rng, size, b.files)
    if which == 4:
        return _json_dump(rng, size)
    if which == 5:
        return _app_log(rng, size, "api-1  | ")
    if which == 8:
        return _psql_dump(rng, size)
    return _app_log(rng, size)


def _huge_call(b: _Builder, which: int) -> int:
    rng = b.rng
    size = rng.randrange(60_000, 198_001)
    command = _HUGE_COMMANDS[which]
    if which in (0, 1, 7) and b.host == "claude" and rng.random() < 0.3:
        path = command.split()[-1]
        text = _huge_output(b, which, size)
        count = len(_lines(text))
        file = {"filePath": b.abs(path), "content": text, "numLines": count, "startLine": 1, "totalLines": count}
        b.read_paths.add(path)
        return b._tool("Read", {"file_path": b.abs(path)}, {"type": "text", "file": file}, rng.randrange(60, 400))
    err = "# exported in EUR (development)\n" if which == 2 else ""
    return b.sh(command, _huge_output(b, which, size), err=err, ms=rng.randrange(200, 12000))


def _logs_listing(rng: random.Random) -> str:
    sizes = [rng.randrange(2_000_000, 90_000_000) for _ in range(4)]
    names = ("app.log", "app.log.1", "export-2024-11-13.log", "worker.log")
    rows = [
        f"-rw-r--r--  1 u u {size:>9} Nov 14 0{i + 1}:12 {name}"
        for i, (size, name) in enumerate(zip(sizes, names, strict=True))
    ]
    return f"total {sum(sizes) // 1024}\n" + "\n".join(rows) + "\n"


def _burn(b: _Builder, index: int) -> int:
    rng = b.rng
    b.start()
    _earlier_turn(b, 0.25)
    prompt, order, conclusion = _BURN_SCENARIOS[index % len(_BURN_SCENARIOS)]
    b.prompt(prompt)
    if any(_HUGE_COMMANDS[w].startswith(("cat logs", "tail")) for w in order[:2]):
        b.sh("ls -la logs" if rng.random() < 0.5 else "ls logs", _logs_listing(rng), ms=rng.randrange(3, 20))
    sources = ["scripts/export_orders.py", "shopapi/workers/email_worker.py", "shopapi/core/logsetup.py"]
    for path in rng.sample(sources, rng.randrange(1, 4)):
        b.read(path)
    if rng.random() < 0.6:
        b.grep(
            rng.choice((r"def (main|run_once)", "session_scope", "logger\\.(warning|error|exception)")),
            "shopapi scripts",
        )
    if rng.random() < 0.4:
        b.git_log()
    for which in [*order, *[w for w in _HUGE_COMMANDS if w not in order]]:
        _huge_call(b, which)
        if burn_step(b.events) is not None:
            break
        if rng.random() < 0.5:
            b.grep(rng.choice(("def run_once", "smtp", "session_scope", "def main", "created_at")), "shopapi scripts")
    step = burn_step(b.events)
    if step is None:
        raise _Retry
    for _ in range(rng.randrange(0, 3)):
        b.read(
            rng.choice(("shopapi/services/emails.py", "shopapi/workers/email_worker.py", "scripts/export_orders.py"))
        )
    b.stop(conclusion)
    b.end()
    return step


_CLOCK_PROMPTS = (
    "go through all of shopapi/ and add a one-line docstring to every public function that doesn't have one, "
    "plus input validation where a function takes quantities or amounts. run the tests as you go",
    "please do a pass over the services, utils and api modules: docstrings everywhere, and guard against "
    "negative amounts/quantities. keep the tests green",
    "shopapi/ 以下の全モジュールで、docstring のない公開関数に docstring を付け、数量・金額の引数には検証を"
    "追加してください。テストを流しながら進めてください。",
    "shopapi 전체 모듈을 돌면서 docstring이 없는 공개 함수에 docstring을 달고, "
    "수량/금액 인자에는 검증을 추가해 주세요.",
)


def _clock(b: _Builder, index: int) -> int:
    rng = b.rng
    b.start()
    _earlier_turn(b, 0.35)
    target = rng.randrange(55, 78)
    b.prompt(rng.choice(_CLOCK_PROMPTS))
    prompt_at = len(b.events) - 1
    tests = {a.module: a.test for a in _AREAS}
    modules = [p for p in b.files if re.fullmatch(r"(shopapi|scripts)/[\w/]+\.py", p) and p not in HUBS]
    modules = [p for p in modules if _functions(b.files[p])]
    rng.shuffle(modules)
    b.grep(r"^def [a-z]", "shopapi scripts", files_only=True)
    done: list[str] = []
    while modules and _turn_calls(b) < target - 3:
        path = modules.pop()
        b.read(path)
        for _ in range(rng.randrange(1, 3)):
            options = _choices(path, b.files[path], purpose="sweep")
            if not options or _turn_calls(b) >= target - 3:
                break
            b.edit(path, *rng.choice(options))
        done.append(path)
        if path in tests and _turn_calls(b) < target - 3 and rng.random() < 0.6:
            b.pytest(tests[path])
    for test in sorted(set(tests.values())):
        if _turn_calls(b) >= target - 3:
            break
        b.pytest(test)
    b.pytest("")
    _ruff(b)
    b.git_diff(stat=True)
    b.stop(
        f"Done: docstrings and input checks in {len(done)} modules ({', '.join(done[:4])}, ...). "
        "Tests, ruff and the diff are above."
    )
    b.end()
    calls = [i for i, (kind, _) in enumerate(b.events) if i > prompt_at and kind.startswith("post-tool")]
    return calls[CLOCK_CALLS - 1]


# ---------------------------------------------------------------- the definitions, checked


def output_text(kind: str, payload: dict[str, Any], *, compact: bool = False) -> str:
    """The text a tool event puts into the context: Claude's stdout+stderr, ``error`` or the JSON of
    ``tool_response``; Codex's response string."""
    if kind == "post-tool-failure":
        return str(payload["error"])
    response = payload["tool_response"]
    if isinstance(response, str):
        return response
    if payload["tool_name"] == "Bash":
        return str(response["stdout"]) + str(response["stderr"])
    if compact:
        return json.dumps(response, separators=(",", ":"), ensure_ascii=False)
    return json.dumps(response)


def _is_edit(payload: dict[str, Any]) -> bool:
    return payload.get("tool_name") in ("Edit", "Write", "MultiEdit", "apply_patch")


def _edited(payload: dict[str, Any]) -> list[str]:
    """Repository-relative paths an editing call changed."""
    tool_input = payload["tool_input"]
    if payload["tool_name"] == "apply_patch":
        here = payload["cwd"][len(REPO) :].lstrip("/")
        found = re.findall(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", tool_input["command"], re.M)
        return [os.path.normpath(os.path.join(here, p)) for p in found]
    return [str(tool_input["file_path"])[len(REPO) + 1 :]]


def burn_step(events: list[tuple[str, dict[str, Any]]], *, compact: bool = False, whole: bool = False) -> int | None:
    """The first tool event at which ``used + 5 * mean(last five outputs) >= WINDOW_TOKENS``."""
    used, recent = 0.0, list[float]()
    for i, (kind, payload) in enumerate(events):
        if kind == "user-prompt":
            used += (len(payload["prompt"]) // 4) if whole else len(payload["prompt"]) / 4
        elif kind.startswith("post-tool"):
            chars = len(output_text(kind, payload, compact=compact))
            tokens = chars // 4 if whole else chars / 4
            used += tokens
            recent = [*recent, tokens][-5:]
            if used + 5 * sum(recent) / len(recent) >= WINDOW_TOKENS:
                return i
    return None


def _burn_peak(events: list[tuple[str, dict[str, Any]]]) -> float:
    used, recent, peak = 0.0, [0.0], 0.0
    for kind, payload in events:
        if kind == "user-prompt":
            used += len(payload["prompt"]) / 4
        elif kind.startswith("post-tool"):
            tokens = len(output_text(kind, payload)) / 4
            used += tokens
            recent = [*recent, tokens][-5:]
            peak = max(peak, used + 5 * sum(recent) / len(recent))
    return peak / WINDOW_TOKENS


def _pain_step(events: list[tuple[str, dict[str, Any]]], failed: set[int], limit: int = 3) -> int | None:
    streaks: dict[str, tuple[str, int]] = {}
    for i, (kind, payload) in enumerate(events):
        if not kind.startswith("post-tool") or payload["tool_name"] != "Bash":
            continue
        command = str(payload["tool_input"]["command"])
        if i not in failed:
            streaks.pop(command, None)
            continue
        text = _normalize(output_text(kind, payload))
        previous = streaks.get(command)
        count = previous[1] + 1 if previous and previous[0] == text else 1
        streaks[command] = (text, count)
        if count >= limit:
            return i
    return None


def _loop_step(events: list[tuple[str, dict[str, Any]]], limit: int = 3) -> int | None:
    counts: dict[str, int] = {}
    for i, (kind, payload) in enumerate(events):
        if not kind.startswith("post-tool"):
            continue
        if _is_edit(payload):
            counts.clear()
            continue
        key = json.dumps([payload["tool_name"], payload["tool_input"], output_text(kind, payload)], sort_keys=True)
        counts[key] = counts.get(key, 0) + 1
        if counts[key] >= limit:
            return i
    return None


def _reach_step(events: list[tuple[str, dict[str, Any]]]) -> int | None:
    for i, (kind, payload) in enumerate(events):
        if kind == "post-tool" and _is_edit(payload) and any(p in HUBS for p in _edited(payload)):
            return i
    return None


def _turn_sizes(events: list[tuple[str, dict[str, Any]]]) -> list[int]:
    sizes: list[int] = []
    for kind, _ in events:
        if kind == "user-prompt":
            sizes.append(0)
        elif kind.startswith("post-tool"):
            sizes[-1] += 1
    return sizes


def _clock_step(events: list[tuple[str, dict[str, Any]]]) -> int | None:
    count = 0
    for i, (kind, _) in enumerate(events):
        if kind == "user-prompt":
            count = 0
        elif kind.startswith("post-tool"):
            count += 1
            if count == CLOCK_CALLS:
                return i
    return None


def _steps(b: _Builder) -> dict[str, int | None]:
    return {
        "pain": _pain_step(b.events, b.failed),
        "loop": _loop_step(b.events),
        "reach": _reach_step(b.events),
        "burn": burn_step(b.events),
        "clock": _clock_step(b.events),
    }


def _problems(b: _Builder, kind: str, expect: int | None) -> list[str]:
    """What is wrong with a drawn session (empty when it can be used)."""
    problems = [f"{name} at {step}" for name, step in _steps(b).items() if name != kind and step is not None]
    if kind != "nominal" and _steps(b)[kind] != expect:
        problems.append(f"{kind} expected at {expect}, found at {_steps(b)[kind]}")
    if kind == "burn" and {burn_step(b.events, compact=True), burn_step(b.events, whole=True)} != {expect}:
        problems.append("burn step depends on how tokens are counted")
    if kind == "pain" and _pain_step(b.events, b.failed, 5) is None:
        problems.append("fewer than five identical failures")
    sizes = _turn_sizes(b.events)
    chars = sum(len(output_text(k, p)) for k, p in b.events if k.startswith("post-tool"))
    if kind == "nominal":
        if _pain_step(b.events, b.failed, 2) is not None:
            problems.append("the same failure twice")
        if min(sizes) < 5 or max(sizes) > 40 or chars > 250_000 or _burn_peak(b.events) > 0.5:
            problems.append(f"size: turns {sizes}, {chars} characters")
    elif kind != "clock" and (max(sizes) >= 45 or (kind != "burn" and chars > 250_000)):
        problems.append(f"size: turns {sizes}, {chars} characters")
    elif kind == "clock" and ((sorted(sizes)[-2:-1] or [0])[0] >= 45 or not 55 <= max(sizes) <= 80):
        problems.append(f"size: turns {sizes}")
    return problems


# ---------------------------------------------------------------- the sessions

_PLANTERS: dict[str, Callable[[_Builder, int], int | None]] = {
    "pain": _pain,
    "loop": _loop,
    "reach": _reach,
    "burn": _burn,
    "clock": _clock,
}


def _plant_nothing(b: _Builder, index: int) -> None:
    _nominal(b)


def _session(kind: str, host: str, index: int) -> Session:
    name = f"{kind}-{host}-{index:02d}"
    problems: list[str] = []
    for attempt in range(60):
        rng = random.Random(f"sensor-sessions/{name}/{attempt}")
        b = _Builder(host, rng)
        try:
            expect = _PLANTERS.get(kind, _plant_nothing)(b, index)
        except _Retry:
            problems = ["retry"]
            continue
        problems = _problems(b, kind, expect)
        if not problems:
            split = "tune" if index % 2 == 0 else "held-out"
            return Session(name, host, split, kind, b.events, expect)
    raise RuntimeError(f"cannot build {name}: {problems}")


def sessions() -> list[Session]:
    """All sessions: KIND_COUNTS per kind, half per host; within a host even indexes tune, odd ones are held out."""
    return [
        _session(kind, host, index)
        for kind, count in KIND_COUNTS.items()
        for host in HOSTS
        for index in range(count // 2)
    ]


def _main() -> None:
    importers = _importers(repo_files())
    hubs = {path: n for path, n in importers.items() if n >= 10}
    assert hubs == HUBS, hubs
    built = sessions()
    print(f"{len(repo_files())} repository files; hubs: {HUBS}")
    print(f"{len(built)} sessions")
    for kind in KIND_COUNTS:
        for host in HOSTS:
            group = [s for s in built if s.kind == kind and s.host == host]
            splits = {split: sum(s.split == split for s in group) for split in ("tune", "held-out")}
            tools = [sum(k.startswith("post-tool") for k, _ in s.events) for s in group]
            chars = [sum(len(output_text(k, p)) for k, p in s.events if k.startswith("post-tool")) for s in group]
            turns = [sum(k == "user-prompt" for k, _ in s.events) for s in group]
            print(
                f"  {kind:8} {host:6} {len(group):3} sessions {splits}  turns {min(turns)}-{max(turns)}  "
                f"tool calls {min(tools)}-{max(tools)}  output {min(chars):,}-{max(chars):,} chars"
            )


if __name__ == "__main__":
    _main()
